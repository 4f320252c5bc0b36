//! A scratch folder in the temporary directory, removed with everything in it when dropped.
//!
//! Use from an integration test with `#[path = "common/scratch.rs"] mod scratch;`.

use std::path::{Path, PathBuf};

/// A folder that lives as long as this value.
pub struct Scratch(PathBuf);

impl Scratch {
    /// `name` under the temporary directory, emptied first if a crashed run left it behind.
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch folder");
        Scratch(dir)
    }

    /// The folder.
    #[allow(dead_code)]
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
