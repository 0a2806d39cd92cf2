//! A loaded model: the mapped GGUF file, its validated config and typed
//! weights. Both the CPU reference and the GPU engine start from here.

pub mod config;
pub mod recipe;
pub mod weights;

use std::path::Path;

pub use config::{Config, Gating, Yarn};
pub use weights::{DenseFfn, ExpertsGateUp, Ffn, LayerWeights, QProj, Weights};

use crate::error::Result;
use crate::gguf::GgufFile;

pub struct Model {
    pub file: GgufFile,
    pub config: Config,
    pub weights: Weights,
}

impl Model {
    pub fn open(path: impl AsRef<Path>) -> Result<Model> {
        Self::from_gguf(GgufFile::open(path)?)
    }

    pub fn from_gguf(file: GgufFile) -> Result<Model> {
        let config = Config::from_gguf(&file)?;
        let weights = Weights::from_gguf(&file, &config)?;
        Ok(Model {
            file,
            config,
            weights,
        })
    }
}
