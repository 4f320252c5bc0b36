//! Finding and reading the kubeconfig as kubectl does: `--kubeconfig`, else `KUBECONFIG` (a
//! list of files, merged), else `~/.kube/config`.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

use kube::config::Kubeconfig;

use super::ClusterError;

/// Where the kubeconfig came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeconfigSource {
    /// `--kubeconfig FILE`.
    Flag(PathBuf),
    /// The `KUBECONFIG` environment variable: these files, merged (the first to set a value wins).
    Env(Vec<PathBuf>),
    /// The default `~/.kube/config`.
    Default(PathBuf),
    /// No kubeconfig, but running in a pod: the service account's token and CA.
    InCluster,
}

impl fmt::Display for KubeconfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KubeconfigSource::Flag(p) => write!(f, "{} (--kubeconfig)", p.display()),
            KubeconfigSource::Env(paths) => {
                let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                write!(f, "{} (KUBECONFIG)", list.join(", "))
            }
            KubeconfigSource::Default(p) => write!(f, "{}", p.display()),
            KubeconfigSource::InCluster => f.write_str("in-cluster service account"),
        }
    }
}

/// The user's home directory (`HOME`, or `USERPROFILE` on Windows).
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// Decides which kubeconfig to read: `flag` (from `--kubeconfig`), else the paths in `env` (the
/// value of `KUBECONFIG`; empty entries are ignored), else `home/.kube/config` if it exists,
/// else the in-cluster service account when `KUBERNETES_SERVICE_HOST` is set.
pub fn kubeconfig_source(
    flag: Option<&Path>,
    env: Option<&OsStr>,
    home: Option<&Path>,
) -> Result<KubeconfigSource, ClusterError> {
    if let Some(path) = flag {
        return Ok(KubeconfigSource::Flag(path.to_path_buf()));
    }
    if let Some(value) = env {
        let paths: Vec<PathBuf> = std::env::split_paths(value)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        if !paths.is_empty() {
            return Ok(KubeconfigSource::Env(paths));
        }
    }
    let default = home.map(|h| h.join(".kube").join("config"));
    if let Some(path) = &default
        && path.exists()
    {
        return Ok(KubeconfigSource::Default(path.clone()));
    }
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        return Ok(KubeconfigSource::InCluster);
    }
    Err(ClusterError::NoKubeconfig { looked_at: default })
}

/// Reads (and for `KUBECONFIG` lists, merges) the kubeconfig files of `source`.
/// [`KubeconfigSource::InCluster`] has no file and reads as an empty kubeconfig.
pub fn read_kubeconfig(source: &KubeconfigSource) -> Result<Kubeconfig, ClusterError> {
    let read = |path: &PathBuf| {
        Kubeconfig::read_from(path).map_err(|source| ClusterError::KubeconfigRead {
            path: path.clone(),
            message: read_error_text(&source),
        })
    };
    match source {
        KubeconfigSource::Flag(path) | KubeconfigSource::Default(path) => read(path),
        KubeconfigSource::Env(paths) => {
            let mut merged = Kubeconfig::default();
            for path in paths {
                let next = read(path)?;
                merged = merged
                    .merge(next)
                    .map_err(|source| ClusterError::KubeconfigRead {
                        path: path.clone(),
                        message: source.to_string(),
                    })?;
            }
            Ok(merged)
        }
        KubeconfigSource::InCluster => Ok(Kubeconfig::default()),
    }
}

fn read_error_text(error: &kube::config::KubeconfigError) -> String {
    match error {
        kube::config::KubeconfigError::ReadConfig(io, _) => io.to_string(),
        other => other.to_string(),
    }
}

/// The context `connect` uses (`wanted`, else the kubeconfig's current-context) and its user.
pub fn select_context(
    kubeconfig: &Kubeconfig,
    wanted: Option<&str>,
) -> Result<(String, String), ClusterError> {
    let name = match wanted.or(kubeconfig.current_context.as_deref()) {
        Some(name) if !name.is_empty() => name,
        _ => return Err(ClusterError::NoContext),
    };
    let context = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == name)
        .ok_or_else(|| ClusterError::UnknownContext {
            context: name.to_string(),
            available: kubeconfig.contexts.iter().map(|c| c.name.clone()).collect(),
        })?;
    let user = context
        .context
        .as_ref()
        .and_then(|c| c.user.clone())
        .unwrap_or_default();
    Ok((name.to_string(), user))
}
