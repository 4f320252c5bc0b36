//! Where a webhook call goes: upstream's REST client construction from `clientConfig`
//! (`pkg/util/webhook/client.go`), without the IO.

use super::call::Endpoint;
use super::status::go_duration_secs;
use crate::api::WebhookClientConfig;

/// The endpoint of a client config, with `?timeout=<secs>` appended; Err is the reason the REST
/// client could not be built.
pub fn endpoint(cfg: &WebhookClientConfig, timeout_secs: u64) -> Result<Endpoint, String> {
    let mut endpoint = untimed_endpoint(cfg)?;
    with_timeout(&mut endpoint, timeout_secs);
    Ok(endpoint)
}

/// Appends `?timeout=<secs>` to an endpoint from [`untimed_endpoint`].
pub(crate) fn with_timeout(endpoint: &mut Endpoint, timeout_secs: u64) {
    endpoint.url.push_str("?timeout=");
    endpoint.url.push_str(&go_duration_secs(timeout_secs));
}

/// [`endpoint`] before the timeout query is appended: what every call of a webhook shares.
pub(crate) fn untimed_endpoint(cfg: &WebhookClientConfig) -> Result<Endpoint, String> {
    if let Some(svc) = &cfg.service {
        let port = svc.port.unwrap_or(443);
        let port = u16::try_from(port).map_err(|_| format!("invalid service port {port}"))?;
        let server_name = format!("{}.{}.svc", svc.name, svc.namespace);
        let path = match svc.path.as_deref() {
            None | Some("") => "/".to_string(),
            Some(p) if p.starts_with('/') => p.to_string(),
            Some(p) => format!("/{p}"),
        };
        return Ok(Endpoint {
            url: format!("https://{server_name}:{port}{path}"),
            auth_target: format!("{server_name}:{port}"),
            server_name,
            port,
            service: Some(svc.clone()),
            http2: false,
        });
    }
    let Some(url) = &cfg.url else {
        return Err("webhook configuration must have either service or URL".into());
    };
    let parsed = parse_url(url).map_err(|e| format!("Unparsable URL: {e}"))?;
    let port = parsed.port.unwrap_or(443);
    let host_port = match parsed.port {
        Some(p) => format!("{}:{p}", parsed.host_with_brackets()),
        None => parsed.host_with_brackets(),
    };
    let path = if parsed.path.is_empty() {
        "/".to_string()
    } else {
        parsed.path.clone()
    };
    let loopback = parsed.host == "localhost"
        || parsed
            .host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    Ok(Endpoint {
        url: format!("{}://{host_port}{path}", parsed.scheme),
        auth_target: format!("{}:{port}", parsed.host_with_brackets()),
        server_name: parsed.host,
        port,
        service: None,
        http2: loopback,
    })
}

/// The parts of a webhook URL upstream uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedUrl {
    /// Scheme, lowercased.
    pub scheme: String,
    /// Host without brackets.
    pub host: String,
    /// Explicit port.
    pub port: Option<u16>,
    /// Path (may be empty).
    pub path: String,
    /// User info was present.
    pub has_user_info: bool,
    /// Query was present.
    pub has_query: bool,
    /// Fragment was present.
    pub has_fragment: bool,
}

impl ParsedUrl {
    fn host_with_brackets(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        }
    }
}

/// A small absolute-URL parser sufficient for webhook URLs (`scheme://[user@]host[:port][/path][?q][#f]`).
pub fn parse_url(url: &str) -> Result<ParsedUrl, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("parse {url:?}: missing protocol scheme"))?;
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        return Err(format!(
            "parse {url:?}: first path segment in URL cannot contain colon"
        ));
    }
    let (rest, fragment) = match rest.split_once('#') {
        Some((r, _)) => (r, true),
        None => (rest, false),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((r, _)) => (r, true),
        None => (rest, false),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (user, hostport) = match authority.rsplit_once('@') {
        Some((_, h)) => (true, h),
        None => (false, authority),
    };
    let (host, port) = if let Some(stripped) = hostport.strip_prefix('[') {
        let (h, after) = stripped
            .split_once(']')
            .ok_or_else(|| format!("parse {url:?}: missing ']' in host"))?;
        (h.to_string(), after.strip_prefix(':'))
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (hostport.to_string(), None),
        }
    };
    let port = match port {
        None | Some("") => None,
        Some(p) => Some(p.parse::<u16>().map_err(|_| {
            format!(
                "parse {url:?}: invalid port {:?} after host",
                format!(":{p}")
            )
        })?),
    };
    Ok(ParsedUrl {
        scheme: scheme.to_ascii_lowercase(),
        host,
        port,
        path: path.to_string(),
        has_user_info: user,
        has_query: query,
        has_fragment: fragment,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ServiceReference;

    #[test]
    fn service_endpoint_follows_upstream() {
        let cfg = WebhookClientConfig {
            service: Some(ServiceReference {
                namespace: "default".into(),
                name: "webhook-test".into(),
                path: Some("disallow".into()),
                port: None,
            }),
            ..Default::default()
        };
        let e = endpoint(&cfg, 30).unwrap();
        assert_eq!(
            e.url,
            "https://webhook-test.default.svc:443/disallow?timeout=30s"
        );
        assert_eq!(e.auth_target, "webhook-test.default.svc:443");
        assert!(!e.http2);
    }

    #[test]
    fn url_endpoint_follows_upstream() {
        let cfg = WebhookClientConfig {
            url: Some("https://127.0.0.1:18443/add-label".into()),
            ..Default::default()
        };
        let e = endpoint(&cfg, 10).unwrap();
        assert_eq!(e.url, "https://127.0.0.1:18443/add-label?timeout=10s");
        assert_eq!(
            (e.server_name.as_str(), e.port, e.http2),
            ("127.0.0.1", 18443, true)
        );
        let cfg = WebhookClientConfig {
            url: Some("https://hooks.example.com".into()),
            ..Default::default()
        };
        let e = endpoint(&cfg, 10).unwrap();
        assert_eq!(e.url, "https://hooks.example.com/?timeout=10s");
        assert_eq!(e.auth_target, "hooks.example.com:443");
        assert!(!e.http2);
        assert!(endpoint(&WebhookClientConfig::default(), 10).is_err());
    }
}
