//! `akbench-worker`: the worker daemon. Everything is in [`akbench_worker::daemon`]; exit
//! codes are documented there.

fn main() {
    std::process::exit(akbench_worker::daemon::main_with_args(std::env::args_os()));
}
