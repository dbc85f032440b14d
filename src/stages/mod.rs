//! The stages that turn queries into actions. `checkout` reads repositories; `extract` holds the
//! curation filters. Later stages (env, generate, validate, refine, assemble) join here.

pub mod checkout;
pub mod env;
pub mod extract;
