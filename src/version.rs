//! The Kubernetes release whose behaviour is modelled (`--kube-version 1.N`).

use std::fmt;
use std::str::FromStr;

/// A Kubernetes minor release, 1.28 to [`KubeVersion::NEWEST`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion {
    minor: u32,
}

impl KubeVersion {
    /// The oldest release modelled.
    pub const OLDEST: KubeVersion = KubeVersion { minor: 28 };
    /// The newest release modelled (the default).
    pub const NEWEST: KubeVersion = KubeVersion { minor: 37 };

    /// `1.minor`, if it is within the modelled range.
    pub fn new(minor: u32) -> Option<Self> {
        (Self::OLDEST.minor..=Self::NEWEST.minor)
            .contains(&minor)
            .then_some(Self { minor })
    }

    /// The minor number.
    pub fn minor(self) -> u32 {
        self.minor
    }

    /// True when this release is 1.`minor` or newer.
    pub fn at_least(self, minor: u32) -> bool {
        self.minor >= minor
    }
}

impl Default for KubeVersion {
    fn default() -> Self {
        Self::NEWEST
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.minor)
    }
}

/// Why a `--kube-version` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported Kubernetes version {0:?}: expected 1.{min} to 1.{max}", min = KubeVersion::OLDEST.minor, max = KubeVersion::NEWEST.minor)]
pub struct UnsupportedVersion(pub String);

impl FromStr for KubeVersion {
    type Err = UnsupportedVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().trim_start_matches('v');
        let mut parts = t.split('.');
        let (Some("1"), Some(minor), rest) = (parts.next(), parts.next(), parts.next()) else {
            return Err(UnsupportedVersion(s.into()));
        };
        if rest.is_some_and(|p| p.parse::<u32>().is_err()) || parts.next().is_some() {
            return Err(UnsupportedVersion(s.into()));
        }
        minor
            .parse()
            .ok()
            .and_then(KubeVersion::new)
            .ok_or_else(|| UnsupportedVersion(s.into()))
    }
}
