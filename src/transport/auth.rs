//! Webhook credentials from a kubeconfig file (the `kubeConfigFile` of kube-apiserver's
//! `WebhookAdmissionConfiguration`), resolved per call target exactly as
//! `defaultAuthenticationInfoResolver` does.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;

/// Why a kubeconfig could not be loaded, or why the credentials for a target cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The file could not be read.
    #[error("error loading config file {path:?}: {cause}")]
    Read {
        /// The file.
        path: String,
        /// Go-style cause, e.g. `open /x: no such file or directory`.
        cause: String,
    },
    /// The text is not a kubeconfig.
    #[error("error loading config: {0}")]
    Parse(String),
    /// The matching user has an `auth-provider` entry (upstream refuses these).
    #[error("auth provider not supported")]
    AuthProviderNotSupported,
    /// The matching user has an `exec` entry; hookscope never runs credential plugins.
    #[error("exec credential plugins are not supported")]
    ExecNotSupported,
    /// A file the matching user refers to (`tokenFile`, `client-certificate`, `client-key`) could
    /// not be read.
    #[error("{0}")]
    File(String),
}

/// Impersonation settings of a kubeconfig user (`as`, `as-uid`, `as-groups`, `as-user-extra`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Impersonation {
    /// `Impersonate-User`.
    pub user: String,
    /// `Impersonate-Uid`, when set.
    pub uid: Option<String>,
    /// One `Impersonate-Group` header each.
    pub groups: Vec<String>,
    /// `Impersonate-Extra-<key>` headers.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The credentials presented to one webhook (upstream: the `rest.Config` built from the matching
/// kubeconfig user). `Debug` shows which credentials are present, never their values.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Credentials {
    /// PEM client certificate chain (`client-certificate-data`, else the `client-certificate`
    /// file).
    pub client_cert_pem: Option<Vec<u8>>,
    /// PEM private key (`client-key-data`, else the `client-key` file).
    pub client_key_pem: Option<Vec<u8>>,
    /// `Authorization: Bearer` token (`token`, else the contents of `tokenFile`).
    pub bearer_token: Option<String>,
    /// Basic-auth user name.
    pub username: Option<String>,
    /// Basic-auth password.
    pub password: Option<String>,
    /// CA data to trust in addition to the webhook's `caBundle`. Upstream's kubeconfig resolver
    /// only reads `users[]`, so [`WebhookAuth`] never sets this; it exists for callers that build
    /// credentials themselves.
    pub ca_pem: Option<Vec<u8>>,
    /// Impersonation headers, when the user has `as`.
    pub impersonate: Option<Impersonation>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let present = |v: bool| if v { "<set>" } else { "<none>" };
        f.debug_struct("Credentials")
            .field("client_cert_pem", &present(self.client_cert_pem.is_some()))
            .field("client_key_pem", &present(self.client_key_pem.is_some()))
            .field("bearer_token", &present(self.bearer_token.is_some()))
            .field("username", &self.username)
            .field("password", &present(self.password.is_some()))
            .field("ca_pem", &present(self.ca_pem.is_some()))
            .field("impersonate", &self.impersonate)
            .finish()
    }
}

impl Credentials {
    /// Whether a client certificate is presented: like client-go, only when both a certificate and
    /// a key are configured.
    pub fn has_client_cert(&self) -> bool {
        self.client_cert_pem.as_ref().is_some_and(|c| !c.is_empty())
            && self.client_key_pem.as_ref().is_some_and(|k| !k.is_empty())
    }
}

/// Webhook credentials loaded from a kubeconfig.
#[derive(Debug, Clone, Default)]
pub struct WebhookAuth {
    users: HashMap<String, Result<Credentials, AuthError>>,
    contexts: HashMap<String, String>,
    current_context: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawConfig {
    users: Option<Vec<RawNamedUser>>,
    contexts: Option<Vec<RawNamedContext>>,
    #[serde(rename = "current-context")]
    current_context: Option<String>,
}

#[derive(Deserialize)]
struct RawNamedUser {
    name: String,
    #[serde(default)]
    user: Option<RawUser>,
}

#[derive(Deserialize)]
struct RawNamedContext {
    name: String,
    #[serde(default)]
    context: Option<RawContext>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawContext {
    user: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawUser {
    #[serde(rename = "client-certificate")]
    client_certificate: Option<String>,
    #[serde(rename = "client-certificate-data")]
    client_certificate_data: Option<String>,
    #[serde(rename = "client-key")]
    client_key: Option<String>,
    #[serde(rename = "client-key-data")]
    client_key_data: Option<String>,
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    #[serde(rename = "as")]
    impersonate: Option<String>,
    #[serde(rename = "as-uid")]
    impersonate_uid: Option<String>,
    #[serde(rename = "as-groups")]
    impersonate_groups: Option<Vec<String>>,
    #[serde(rename = "as-user-extra")]
    impersonate_user_extra: Option<BTreeMap<String, Vec<String>>>,
    username: Option<String>,
    password: Option<String>,
    #[serde(rename = "auth-provider")]
    auth_provider: Option<serde_json::Value>,
    exec: Option<serde_json::Value>,
}

impl WebhookAuth {
    /// No kubeconfig: every target is anonymous.
    pub fn empty() -> Self {
        Self::default()
    }

    /// True when no credentials are defined: every target resolves to none.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// Parses kubeconfig text (YAML or JSON). Relative file references are taken relative to the
    /// working directory.
    pub fn parse(text: &str) -> Result<Self, AuthError> {
        Self::parse_in(text, None)
    }

    /// Reads a kubeconfig file. Relative file references are taken relative to the file's
    /// directory, as clientcmd does.
    pub fn load(path: &Path) -> Result<Self, AuthError> {
        let text = std::fs::read_to_string(path).map_err(|e| AuthError::Read {
            path: path.display().to_string(),
            cause: go_open_error(path, &e),
        })?;
        Self::parse_in(&text, path.parent())
    }

    fn parse_in(text: &str, base: Option<&Path>) -> Result<Self, AuthError> {
        let raw: RawConfig = if text.trim().is_empty() {
            RawConfig::default()
        } else {
            crate::yaml::from_str::<Option<RawConfig>>(text)
                .map_err(|e| AuthError::Parse(e.to_string()))?
                .unwrap_or_default()
        };
        let mut users = HashMap::new();
        for named in raw.users.unwrap_or_default() {
            if users.contains_key(&named.name) {
                return Err(AuthError::Parse(format!(
                    "duplicate name {:?} in list of users",
                    named.name
                )));
            }
            let creds = credentials_from(named.user.unwrap_or_default(), base)?;
            users.insert(named.name, creds);
        }
        let mut contexts = HashMap::new();
        for named in raw.contexts.unwrap_or_default() {
            if contexts.contains_key(&named.name) {
                return Err(AuthError::Parse(format!(
                    "duplicate name {:?} in list of contexts",
                    named.name
                )));
            }
            let user = named.context.and_then(|c| c.user).unwrap_or_default();
            contexts.insert(named.name, user);
        }
        Ok(Self {
            users,
            contexts,
            current_context: raw.current_context.unwrap_or_default(),
        })
    }

    /// Resolves the credentials for `target` (`host:port`, or `host` without a port), in
    /// upstream's order: exact user name; `*.`-wildcards dropping leading labels (the port stays
    /// on the last label); for port 443 the same two steps on the bare host; the `*` user; the
    /// current context's user; anonymous (`Ok(None)`). Upstream's in-cluster step for
    /// `kubernetes.default.svc:443` never applies outside a cluster.
    pub fn resolve(&self, target: &str) -> Result<Option<&Credentials>, AuthError> {
        match self.lookup(target) {
            Some(Ok(c)) => Ok(Some(c)),
            Some(Err(e)) => Err(e.clone()),
            None => Ok(None),
        }
    }

    fn lookup(&self, target: &str) -> Option<&Result<Credentials, AuthError>> {
        if let Some(found) = self.exact_or_wildcard(target) {
            return Some(found);
        }
        if let Some((host, "443")) = split_host_port(target)
            && let Some(found) = self.exact_or_wildcard(host)
        {
            return Some(found);
        }
        if let Some(found) = self.users.get("*") {
            return Some(found);
        }
        if !self.current_context.is_empty()
            && let Some(user) = self.contexts.get(&self.current_context)
            && !user.is_empty()
        {
            return self.users.get(user);
        }
        None
    }

    fn exact_or_wildcard(&self, name: &str) -> Option<&Result<Credentials, AuthError>> {
        if let Some(found) = self.users.get(name) {
            return Some(found);
        }
        let steps: Vec<&str> = name.split('.').collect();
        (1..steps.len()).find_map(|i| self.users.get(&format!("*.{}", steps[i..].join("."))))
    }
}

/// Go's `net.SplitHostPort`, enough for resolution targets.
fn split_host_port(target: &str) -> Option<(&str, &str)> {
    if let Some(rest) = target.strip_prefix('[') {
        let (host, port) = rest.split_once("]:")?;
        return Some((host, port));
    }
    let (host, port) = target.rsplit_once(':')?;
    (!host.contains(':')).then_some((host, port))
}

/// Builds the credentials of one user as upstream's `restConfigFromKubeconfig` does. File errors
/// and refused entries are kept and reported when the user is resolved, as upstream reports them
/// only when a webhook needs the user.
fn credentials_from(
    user: RawUser,
    base: Option<&Path>,
) -> Result<Result<Credentials, AuthError>, AuthError> {
    let client_cert_data = decode_bytes("client-certificate-data", &user.client_certificate_data)?;
    let client_key_data = decode_bytes("client-key-data", &user.client_key_data)?;
    Ok(build_credentials(
        user,
        client_cert_data,
        client_key_data,
        base,
    ))
}

fn build_credentials(
    user: RawUser,
    client_cert_data: Option<Vec<u8>>,
    client_key_data: Option<Vec<u8>>,
    base: Option<&Path>,
) -> Result<Credentials, AuthError> {
    let mut creds = Credentials::default();
    let token = user.token.unwrap_or_default();
    let token_file = user.token_file.unwrap_or_default();
    if !token.is_empty() {
        creds.bearer_token = Some(token);
    } else if !token_file.is_empty() {
        let bytes = read_file(&token_file, base)?;
        creds.bearer_token = Some(String::from_utf8_lossy(&bytes).into_owned());
    }
    if let Some(name) = user.impersonate.filter(|n| !n.is_empty()) {
        creds.impersonate = Some(Impersonation {
            user: name,
            uid: user.impersonate_uid.filter(|u| !u.is_empty()),
            groups: user.impersonate_groups.unwrap_or_default(),
            extra: user.impersonate_user_extra.unwrap_or_default(),
        });
    }
    let cert_file = user.client_certificate.unwrap_or_default();
    let key_file = user.client_key.unwrap_or_default();
    if !cert_file.is_empty() || client_cert_data.as_ref().is_some_and(|d| !d.is_empty()) {
        creds.client_cert_pem = data_or_file(client_cert_data, &cert_file, base)?;
        creds.client_key_pem = data_or_file(client_key_data, &key_file, base)?;
    }
    let username = user.username.unwrap_or_default();
    let password = user.password.unwrap_or_default();
    if !username.is_empty() || !password.is_empty() {
        creds.username = Some(username);
        creds.password = Some(password);
    }
    if user.auth_provider.is_some_and(|p| !p.is_null()) {
        return Err(AuthError::AuthProviderNotSupported);
    }
    if user.exec.is_some_and(|e| !e.is_null()) {
        return Err(AuthError::ExecNotSupported);
    }
    Ok(creds)
}

/// Go's `[]byte` in YAML/JSON: padded standard base64.
fn decode_bytes(field: &str, value: &Option<String>) -> Result<Option<Vec<u8>>, AuthError> {
    match value {
        None => Ok(None),
        Some(s) => base64::engine::general_purpose::STANDARD
            .decode(s.trim().as_bytes())
            .map(Some)
            .map_err(|e| AuthError::Parse(format!("{field}: illegal base64 data: {e}"))),
    }
}

/// client-go's `dataFromSliceOrFile`: inline data wins over the file.
fn data_or_file(
    data: Option<Vec<u8>>,
    file: &str,
    base: Option<&Path>,
) -> Result<Option<Vec<u8>>, AuthError> {
    match data {
        Some(d) if !d.is_empty() => Ok(Some(d)),
        _ if !file.is_empty() => read_file(file, base).map(Some),
        _ => Ok(None),
    }
}

fn read_file(file: &str, base: Option<&Path>) -> Result<Vec<u8>, AuthError> {
    let path = match base {
        Some(dir) if Path::new(file).is_relative() => dir.join(file),
        _ => PathBuf::from(file),
    };
    std::fs::read(&path).map_err(|e| AuthError::File(go_open_error(&path, &e)))
}

/// Go's `*PathError` text for a failed open/read.
pub(crate) fn go_open_error(path: &Path, e: &std::io::Error) -> String {
    format!("open {}: {}", path.display(), super::errors::errno_text(e))
}
