//! The `r2e` binary: all the work lives in the library; this only maps the outcome to an exit code.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    r2e::cli::main()
}
