//! The `akbench` binary: parses flags and hands over to the library.

fn main() {
    std::process::exit(akbench::main_with_args(std::env::args_os()));
}
