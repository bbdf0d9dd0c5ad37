//! `akbench-worker`: the worker daemon. Everything is in [`akbench_worker::daemon`]; exit
//! codes are documented there.

fn main() {
    // The one TLS crypto provider of the build is ring; the optional `s3` feature's
    // object_store also links aws-lc-rs, and with two providers linked rustls has no default
    // unless one is installed. Fails only if one is already installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    std::process::exit(akbench_worker::daemon::main_with_args(std::env::args_os()));
}
