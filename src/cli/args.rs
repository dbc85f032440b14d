//! The arguments several commands share, declared once and flattened into each command's.
//! (No doc comments on these structs: a flattened struct's would become the command's `about`.)

use std::path::PathBuf;

use clap::Arg;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use r2e_core::config::{self, Config};
use r2e_core::error::{Error, Result};
use r2e_pipeline::stages::Stage;

// `-p, --pipeline FILE`, default `pipeline.toml`: the pipeline a command reads. A command where
// the file plays a particular part says so with
// `#[command(mut_args(help_of("pipeline", "...")))]`.
#[derive(clap::Args)]
pub struct PipelineFile {
    /// The pipeline file.
    #[arg(short, long, default_value = "pipeline.toml")]
    pub pipeline: PathBuf,
}

impl PipelineFile {
    /// The pipeline's configuration.
    pub fn load(&self) -> Result<Config> {
        config::load(&self.pipeline)
    }
}

// `[PIPELINE]` or `-p PIPELINE`, default `pipeline.toml`: the pipeline of the commands that
// build it (`build`, `curate`, `cluster ...`).
#[derive(clap::Args)]
pub struct PipelinePath {
    /// The pipeline file (default `pipeline.toml`); the same as `-p PIPELINE`.
    #[arg(value_name = "PIPELINE")]
    pipeline: Option<PathBuf>,
    /// The pipeline file (default `pipeline.toml`); the same as the positional PIPELINE.
    #[arg(short = 'p', long = "pipeline", value_name = "PIPELINE")]
    pipeline_flag: Option<PathBuf>,
}

impl PipelinePath {
    /// The pipeline, given as the positional argument or as `-p` (the same file twice is fine;
    /// two different files are bad input).
    pub fn path(&self) -> Result<PathBuf> {
        match (self.pipeline.clone(), self.pipeline_flag.clone()) {
            (Some(a), Some(b)) => {
                let same =
                    |p: &PathBuf| std::fs::canonicalize(p).or_else(|_| std::path::absolute(p));
                if a == b || matches!((same(&a), same(&b)), (Ok(x), Ok(y)) if x == y) {
                    Ok(a)
                } else {
                    Err(Error::input(format!(
                        "two pipelines given: `{}` and `-p {}`; give one",
                        a.display(),
                        b.display()
                    )))
                }
            }
            (a, b) => Ok(a.or(b).unwrap_or_else(|| PathBuf::from("pipeline.toml"))),
        }
    }
}

/// For `#[command(mut_args(help_of(ID, HELP)))]`: a command's own help for a shared argument.
/// (`mut_args` changes it in place; `mut_arg` would move it last, and the shells' completion
/// scripts list the arguments in that order.)
pub fn help_of(id: &'static str, help: &'static str) -> impl FnMut(Arg) -> Arg {
    move |arg| {
        if arg.get_id() == id {
            arg.help(help)
        } else {
            arg
        }
    }
}

/// `--until STAGE`: the stages by name, in order.
pub fn stage_parser() -> impl TypedValueParser<Value = Stage> {
    PossibleValuesParser::new(Stage::ALL.map(Stage::name)).map(|name| {
        name.parse::<Stage>()
            .expect("the possible values are the stages' names")
    })
}

/// The configuration whose dataset a command reads: the variant named, or the pipeline's own
/// when it has no variants (a pipeline with variants needs one named).
pub fn one_dataset<'c>(cfg: &'c Config, variant: Option<&str>) -> Result<&'c Config> {
    match variant {
        Some(name) => cfg.variant(name),
        None if !cfg.variants.is_empty() => Err(Error::input(format!(
            "`{}` builds variants; name one with `--variant NAME` ({})",
            cfg.file.display(),
            cfg.variants
                .iter()
                .map(|v| v.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        None => Ok(cfg),
    }
}
