//! Compiles `akbench/v1/*.proto` with protox (a pure-Rust protobuf compiler), so no system
//! `protoc` is needed, then generates prost messages and tonic clients and servers.

use std::path::Path;

const PROTOS: &[&str] = &["akbench/v1/control.proto", "akbench/v1/workers.proto"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read at run time: `env!` would bake in the folder the build script was compiled in,
    // and cargo reuses that binary for another checkout sharing the target directory.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR")?;
    let root = Path::new(&manifest_dir);
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={}", root.join(proto).display());
    }
    // Source info is kept so that proto comments become rustdoc comments.
    let files = protox::compile(PROTOS, [root])?;
    tonic_prost_build::configure()
        // Clients and servers are generated without the transport helpers (`connect`);
        // the crates that dial or serve enable tonic's `transport` feature themselves.
        .build_transport(false)
        .compile_fds(files)?;
    Ok(())
}
