//! Where a replay's webhook answers come from, chosen the same way by `hookscope replay` and the
//! console: real HTTPS (with `--resolve` and `--webhook-auth`), a recording (`--replies`) or a
//! script (`--script`).

use std::collections::HashMap;
use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

use futures::future::Either;

use super::record::{RecordError, RecordedReplies};
use crate::engine::{Replier, Reply, WebhookCall};
use crate::script::ScriptedReplier;
use crate::transport::{AuthError, HttpsOptions, HttpsReplier, WebhookAuth};

/// Why the webhook answers of a replay could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ReplierError {
    /// `--replies`: the recording could not be loaded.
    #[error("--replies: {0}")]
    Replies(#[from] RecordError),
    /// `--script`: unreadable or invalid.
    #[error("--script {}: {message}", path.display())]
    Script {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// `--webhook-auth`: unreadable or invalid.
    #[error("--webhook-auth: {0}")]
    Auth(#[from] AuthError),
    /// `--resolve`: not `HOST:PORT=ADDR:PORT`.
    #[error("--resolve {entry:?}: {message}")]
    Resolve {
        /// The entry as given.
        entry: String,
        /// What is wrong.
        message: String,
    },
}

/// The flags that choose a replier.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReplierFlags<'a> {
    /// `--replies DIR`.
    pub replies: Option<&'a Path>,
    /// `--script FILE`.
    pub script: Option<&'a Path>,
    /// `--webhook-auth FILE`.
    pub webhook_auth: Option<&'a Path>,
    /// `--resolve HOST:PORT=ADDR:PORT` entries.
    pub resolve: &'a [String],
}

/// A replier chosen at run time.
#[derive(Debug, Clone)]
pub enum AnyReplier {
    /// Real HTTPS.
    Https(HttpsReplier),
    /// A script.
    Scripted(ScriptedReplier),
    /// A recording, offline.
    Recorded(RecordedReplies),
}

impl AnyReplier {
    /// The replier the flags ask for: a recording, else a script, else HTTPS.
    pub fn from_flags(flags: ReplierFlags<'_>) -> Result<Self, ReplierError> {
        if let Some(dir) = flags.replies {
            return Ok(AnyReplier::Recorded(RecordedReplies::load(dir)?));
        }
        if let Some(path) = flags.script {
            let script = |message: String| ReplierError::Script {
                path: path.to_path_buf(),
                message,
            };
            let text = std::fs::read_to_string(path).map_err(|e| script(e.to_string()))?;
            return Ok(AnyReplier::Scripted(
                ScriptedReplier::from_yaml(&text).map_err(script)?,
            ));
        }
        let auth = match flags.webhook_auth {
            Some(p) => WebhookAuth::load(p)?,
            None => WebhookAuth::empty(),
        };
        Ok(AnyReplier::Https(HttpsReplier::new(HttpsOptions {
            auth,
            resolve: parse_resolve(flags.resolve)?,
            ..HttpsOptions::default()
        })))
    }

    /// Calls a recording had no reply for so far (0 for other repliers).
    pub fn missing_replies(&self) -> usize {
        match self {
            AnyReplier::Recorded(r) => r.missing().len(),
            _ => 0,
        }
    }
}

impl Replier for AnyReplier {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        match self {
            AnyReplier::Https(r) => Either::Left(r.reply(calls)),
            AnyReplier::Scripted(r) => Either::Right(Either::Left(r.reply(calls))),
            AnyReplier::Recorded(r) => Either::Right(Either::Right(r.reply(calls))),
        }
    }
}

/// Parses `--resolve HOST:PORT=ADDR:PORT` entries into the transport's dial overrides.
pub fn parse_resolve(entries: &[String]) -> Result<HashMap<String, SocketAddr>, ReplierError> {
    let mut out = HashMap::new();
    for e in entries {
        let bad = |message: String| ReplierError::Resolve {
            entry: e.clone(),
            message,
        };
        let (host, addr) = e
            .split_once('=')
            .ok_or_else(|| bad("expected HOST:PORT=ADDR:PORT".into()))?;
        if host
            .rsplit_once(':')
            .is_none_or(|(_, p)| p.parse::<u16>().is_err())
        {
            return Err(bad(format!(
                "{host:?} must be HOST:PORT with a numeric port"
            )));
        }
        let addr = addr
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| bad(format!("{addr:?} is not an ADDR:PORT")))?;
        out.insert(host.to_string(), addr);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_entries_are_checked() {
        let ok = parse_resolve(&["hook.ns.svc:443=127.0.0.1:8443".into()]).unwrap();
        assert_eq!(ok["hook.ns.svc:443"], "127.0.0.1:8443".parse().unwrap());
        for (entry, fragment) in [
            ("hook.ns.svc:443", "expected HOST:PORT=ADDR:PORT"),
            ("hook.ns.svc=127.0.0.1:1", "must be HOST:PORT"),
            ("hook.ns.svc:443=nowhere", "is not an ADDR:PORT"),
        ] {
            let e = parse_resolve(&[entry.into()]).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--resolve {entry:?}: ")), "{e}");
            assert!(e.contains(fragment), "{e}");
        }
    }
}
