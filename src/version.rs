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

/// The release a server's `/version` names, and the release hookscope models for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerRelease {
    /// The server's `gitVersion` as it answered (`v1.33.3`, `v1.30.2-eks-1234`).
    pub git_version: String,
    /// Its minor number, when `gitVersion` reads as `v1.N…`.
    pub minor: Option<u32>,
    /// The release modelled: the server's own, else the nearest one hookscope knows.
    pub modelled: KubeVersion,
}

impl ServerRelease {
    /// The release modelled for a server whose `/version` says `git_version`: its own minor
    /// when hookscope models it, else the newest (a newer server, or an unreadable version) or
    /// the oldest (an older server).
    pub fn of(git_version: &str) -> ServerRelease {
        let minor = git_version
            .trim()
            .strip_prefix('v')
            .and_then(|v| v.strip_prefix("1."))
            .map(|rest| {
                rest.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
            })
            .and_then(|digits| digits.parse::<u32>().ok());
        let modelled = match minor {
            Some(m) if m < KubeVersion::OLDEST.minor => KubeVersion::OLDEST,
            Some(m) => KubeVersion::new(m).unwrap_or(KubeVersion::NEWEST),
            None => KubeVersion::NEWEST,
        };
        ServerRelease {
            git_version: git_version.to_string(),
            minor,
            modelled,
        }
    }

    /// Whether the modelled release is the server's own.
    pub fn exact(&self) -> bool {
        self.minor == Some(self.modelled.minor)
    }

    /// One line for the console: the release modelled and, when it is not the server's, why.
    pub fn describe(&self) -> String {
        match self.minor {
            Some(m) if m == self.modelled.minor => {
                format!("{} (the server's, {})", self.modelled, self.git_version)
            }
            Some(m) if m > KubeVersion::NEWEST.minor => format!(
                "{} — the server's {} (1.{m}) is newer than hookscope models: replays follow 1.{}",
                self.modelled,
                self.git_version,
                KubeVersion::NEWEST.minor
            ),
            Some(m) => format!(
                "{} — the server's {} (1.{m}) is older than hookscope models: replays follow 1.{}",
                self.modelled,
                self.git_version,
                KubeVersion::OLDEST.minor
            ),
            None => format!(
                "{} — the server's version {:?} does not read as 1.N: replays follow the newest release",
                self.modelled, self.git_version
            ),
        }
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

#[cfg(test)]
mod server_release_tests {
    use super::{KubeVersion, ServerRelease};

    #[test]
    fn a_servers_version_picks_the_release_modelled() {
        let r = ServerRelease::of("v1.33.3");
        assert_eq!(
            (r.minor, r.modelled.minor(), r.exact()),
            (Some(33), 33, true)
        );
        let r = ServerRelease::of("v1.30.2-eks-1234abc");
        assert_eq!(r.modelled.minor(), 30);
        let r = ServerRelease::of("v1.31.0+k3s1");
        assert_eq!(r.modelled.minor(), 31);
        let newer = ServerRelease::of("v1.40.0");
        assert_eq!(newer.modelled, KubeVersion::NEWEST);
        assert!(!newer.exact());
        assert!(newer.describe().contains("newer than hookscope models"));
        let older = ServerRelease::of("v1.25.16");
        assert_eq!(older.modelled, KubeVersion::OLDEST);
        assert!(older.describe().contains("older than hookscope models"));
        let odd = ServerRelease::of("weird");
        assert_eq!((odd.minor, odd.modelled), (None, KubeVersion::NEWEST));
    }
}
