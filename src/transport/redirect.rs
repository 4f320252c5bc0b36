//! Redirects, followed as Go's `http.Client` follows them for the webhook's POST (kube-apiserver's
//! webhook client keeps the default `CheckRedirect`): 301, 302 and 303 re-sent as a GET without
//! a body (and every later hop with them), 307 and 308 re-sent as they came, body included, to
//! any path, port or host and from `https` to `http`; ten requests at most, the tenth redirect
//! refused with `stopped after 10 redirects`. A redirect without a `Location` is an answer like
//! any other. Each hop carries the original request's headers, the credentials (client-go adds
//! them below the client, on every request) and a `Referer` unless it goes from `https` to
//! `http`.

use bytes::Bytes;
use http::header::REFERER;
use http::{HeaderMap, HeaderValue, Method, Request};
use http_body_util::Full;

use super::errors;
use crate::engine::call::{TransportError, TransportErrorKind, WebhookCall};
use crate::gofmt::quote;

/// Go's default `CheckRedirect` refuses the redirect that would make this many requests plus one.
const MAX_REQUESTS: usize = 10;

/// An absolute URL as the transport needs it: scheme, authority (the `Host` header), the host and
/// port it dials, path and query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HopUrl {
    pub scheme: String,
    pub https: bool,
    pub authority: String,
    /// The host without IPv6 brackets.
    pub host: String,
    pub port: u16,
    pub path: String,
    pub query: Option<String>,
}

impl std::fmt::Display for HopUrl {
    /// Go's `URL.String()` of an absolute URL without user or fragment.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}{}", self.scheme, self.authority, self.path)?;
        match &self.query {
            Some(q) => write!(f, "?{q}"),
            None => Ok(()),
        }
    }
}

impl HopUrl {
    /// An absolute URL (the webhook's own, or a redirect's resolved).
    pub(super) fn parse(url: &str) -> Result<Self, String> {
        let Some((scheme, rest)) = split_scheme(url) else {
            return Err(format!("parse {}: missing protocol scheme", quote(url)));
        };
        let scheme = scheme.to_ascii_lowercase();
        let (authority, path, query) = match rest.strip_prefix("//") {
            Some(rest) => {
                let end = rest.find(['/', '?']).unwrap_or(rest.len());
                let (authority, tail) = rest.split_at(end);
                let (path, query) = split_query(tail);
                (authority, resolve_path(path, ""), query)
            }
            // An opaque URL (`mailto:x`): no host to dial, refused for its scheme.
            None => ("", String::new(), None),
        };
        Self::with(url, scheme, authority, path, query)
    }

    fn with(
        text: &str,
        scheme: String,
        authority: &str,
        path: String,
        query: Option<&str>,
    ) -> Result<Self, String> {
        // User information is not part of the host (and not sent).
        let hostport = authority.rsplit('@').next().unwrap_or(authority);
        let (host, port) = match hostport.strip_prefix('[') {
            Some(v6) => match v6.split_once(']') {
                Some((host, rest)) => (host, rest.strip_prefix(':')),
                None => {
                    return Err(format!("parse {}: missing ']' in host", quote(text)));
                }
            },
            None => match hostport.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (hostport, None),
            },
        };
        let https = scheme == "https";
        let default = if https { 443 } else { 80 };
        let port = match port {
            None | Some("") => default,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|_| p.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| {
                    format!(
                        "parse {}: invalid port {} after host",
                        quote(text),
                        quote(&format!(":{p}"))
                    )
                })?,
        };
        Ok(Self {
            https,
            scheme,
            authority: hostport.to_string(),
            host: host.to_string(),
            port,
            path,
            query: query.map(str::to_string),
        })
    }

    /// Go's `URL.Parse(reference)` against this URL (RFC 3986 resolution, as
    /// `URL.ResolveReference` does it); the fragment is dropped, as it is never sent.
    pub(super) fn resolve(&self, reference: &str) -> Result<Self, String> {
        let without_fragment = reference.split('#').next().unwrap_or_default();
        if split_scheme(without_fragment).is_some() {
            return Self::parse(without_fragment);
        }
        if without_fragment.starts_with("//") {
            return Self::parse(&format!("{}:{without_fragment}", self.scheme))
                .map_err(|e| e.replace(&format!("{}:{without_fragment}", self.scheme), reference));
        }
        let (path, query) = split_query(without_fragment);
        let (path, query) = if path.is_empty() {
            (self.path.clone(), query.or(self.query.as_deref()))
        } else {
            (resolve_path(&self.path, path), query)
        };
        Ok(Self {
            path,
            query: query.map(str::to_string),
            ..self.clone()
        })
    }

    /// The request target: Go's `URL.RequestURI()`.
    pub(super) fn request_target(&self) -> String {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        match &self.query {
            Some(q) => format!("{path}?{q}"),
            None => path.to_string(),
        }
    }
}

/// The scheme of an absolute URL and what follows its colon (Go's `getScheme`).
fn split_scheme(url: &str) -> Option<(&str, &str)> {
    let colon = url.find(':')?;
    let scheme = &url[..colon];
    let mut bytes = scheme.bytes();
    let first = bytes.next()?;
    (first.is_ascii_alphabetic()
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))
    .then(|| (scheme, &url[colon + 1..]))
}

fn split_query(text: &str) -> (&str, Option<&str>) {
    match text.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (text, None),
    }
}

/// Go's `resolvePath`: `reference` merged onto `base`, dot segments removed.
fn resolve_path(base: &str, reference: &str) -> String {
    let full = if reference.is_empty() {
        base.to_string()
    } else if !reference.starts_with('/') {
        let keep = base.rfind('/').map_or(0, |i| i + 1);
        format!("{}{reference}", &base[..keep])
    } else {
        reference.to_string()
    };
    if full.is_empty() {
        return full;
    }
    let mut dst = String::from("/");
    let mut first = true;
    let mut last = "";
    for elem in full.split('/') {
        last = elem;
        match elem {
            "." => first = false,
            ".." => {
                let kept = dst[1..].rfind('/');
                match kept {
                    Some(index) => dst.truncate(index + 1),
                    None => {
                        dst.truncate(1);
                        first = true;
                    }
                }
            }
            _ => {
                if !first {
                    dst.push('/');
                }
                dst.push_str(elem);
                first = false;
            }
        }
    }
    if last == "." || last == ".." {
        dst.push('/');
    }
    match dst.strip_prefix("//") {
        Some(rest) => format!("/{rest}"),
        None => dst,
    }
}

/// Where a redirect leads, and how the request is re-sent there.
#[derive(Debug, Clone)]
pub(super) struct Hop {
    pub url: HopUrl,
    /// POST with the review as body (307 and 308 all the way), else GET without a body.
    pub post: bool,
    /// The previous request's URL, unless the hop goes from `https` to `http`.
    pub referer: Option<String>,
}

/// Go's `url.Error` for the webhook's POST: `Post "<url>": <cause>`.
fn url_error(url: &str, cause: impl std::fmt::Display) -> TransportError {
    errors::transport(
        TransportErrorKind::Other,
        format!("Post {}: {cause}", quote(url)),
    )
}

/// A failure of the request sent to `url` after a redirect, named as Go names it. client-go's
/// body-read errors carry no URL and stay as they are.
pub(super) fn hop_error(url: &str, mut e: TransportError) -> TransportError {
    if !e
        .detail
        .starts_with("unexpected error when reading response body")
    {
        e.detail = format!("Post {}: {}", quote(url), e.detail);
    }
    e
}

/// The request Go's client sends after the redirect `status` with `location`, `sent` requests
/// into the chain from `current`; `post` whether the body is still sent. Or the error it
/// returns instead.
pub(super) fn next_hop(
    current: &HopUrl,
    location: &str,
    status: u16,
    post: bool,
    sent: usize,
) -> Result<Hop, TransportError> {
    let url = current.resolve(location).map_err(|e| {
        url_error(
            &current.to_string(),
            format!("failed to parse Location header {}: {e}", quote(location)),
        )
    })?;
    // Once a hop drops the body, no later hop sends it again.
    let post = post && matches!(status, 307 | 308);
    if sent >= MAX_REQUESTS {
        // The default CheckRedirect's error, named after the raw `Location`.
        return Err(url_error(location, "stopped after 10 redirects"));
    }
    let referer = (!(current.https && url.scheme == "http")).then(|| current.to_string());
    if url.scheme != "https" && url.scheme != "http" {
        return Err(url_error(
            &url.to_string(),
            format!("unsupported protocol scheme {}", quote(&url.scheme)),
        ));
    }
    if url.host.is_empty() {
        return Err(url_error(&url.to_string(), "http: no Host in request URL"));
    }
    Ok(Hop { url, post, referer })
}

/// A hop's HTTP/1.1 request as Go's `Request.write` lays it out: request line, `Host`,
/// `User-Agent`, `Content-Length` when a body is sent, the other headers sorted by name
/// (`Referer` among them), then the transport's `Accept-Encoding: gzip`.
pub(super) fn encode_h1(out: &mut Vec<u8>, hop: &Hop, body: &[u8], auth: &HeaderMap) {
    let method = if hop.post { "POST" } else { "GET" };
    let mut head = format!(
        "{method} {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: {}\r\n",
        hop.url.request_target(),
        hop.url.authority,
        super::client::USER_AGENT_VALUE
    )
    .into_bytes();
    if hop.post {
        head.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    let mut fields: Vec<(String, Vec<u8>)> = vec![
        ("Accept".into(), super::client::ACCEPT_VALUE.into()),
        (
            "Content-Type".into(),
            super::client::CONTENT_TYPE_VALUE.into(),
        ),
    ];
    fields.extend(auth.iter().map(|(name, value)| {
        (
            super::client::canonical_header(name.as_str()),
            value.as_bytes().to_vec(),
        )
    }));
    if let Some(referer) = &hop.referer {
        fields.push(("Referer".into(), referer.clone().into_bytes()));
    }
    fields.sort_by(|a, b| a.0.cmp(&b.0));
    out.extend_from_slice(&head);
    for (name, value) in fields {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(&value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Accept-Encoding: gzip\r\n\r\n");
    if hop.post {
        out.extend_from_slice(body);
    }
}

/// A hop's HTTP/2 request: the webhook's headers, the credentials and the `Referer`.
pub(super) fn h2_request(
    hop: &Hop,
    call: &WebhookCall,
    headers: &HeaderMap,
    auth: &HeaderMap,
) -> Result<Request<Full<Bytes>>, String> {
    let method = if hop.post { Method::POST } else { Method::GET };
    let uri = format!(
        "{}://{}{}",
        hop.url.scheme,
        hop.url.authority,
        hop.url.request_target()
    );
    let mut req = Request::builder().method(method).uri(uri);
    let all = req
        .headers_mut()
        .ok_or_else(|| "invalid request".to_string())?;
    all.clone_from(headers);
    for (name, value) in auth {
        all.append(name, value.clone());
    }
    if let Some(referer) = &hop.referer {
        all.insert(
            REFERER,
            HeaderValue::from_str(referer).map_err(|e| e.to_string())?,
        );
    }
    let body = if hop.post {
        call.body.clone()
    } else {
        Bytes::new()
    };
    req.body(Full::new(body)).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> HopUrl {
        HopUrl::parse("https://127.0.0.1:8443/a/b/validate?timeout=10s").unwrap()
    }

    #[test]
    fn locations_resolve_as_go_resolves_them() {
        let to = |loc: &str| base().resolve(loc).map(|u| u.to_string());
        for (loc, want) in [
            ("/allow", "https://127.0.0.1:8443/allow"),
            ("allow", "https://127.0.0.1:8443/a/b/allow"),
            ("../x/./y", "https://127.0.0.1:8443/a/x/y"),
            ("../../../..", "https://127.0.0.1:8443/"),
            ("?q=1", "https://127.0.0.1:8443/a/b/validate?q=1"),
            ("#frag", "https://127.0.0.1:8443/a/b/validate?timeout=10s"),
            ("//localhost:9/p", "https://localhost:9/p"),
            ("HTTP://[::1]:80/x?y#z", "http://[::1]:80/x?y"),
            ("https://example.com", "https://example.com"),
        ] {
            assert_eq!(to(loc).as_deref(), Ok(want), "{loc}");
        }
        let url = base().resolve("http://[::1]/x").unwrap();
        assert_eq!((url.host.as_str(), url.port, url.https), ("::1", 80, false));
        assert_eq!(base().resolve("https://h").unwrap().request_target(), "/");
        assert_eq!(
            to("https://h:abc/"),
            Err("parse \"https://h:abc/\": invalid port \":abc\" after host".into())
        );
    }

    #[test]
    fn hops_follow_go_client_rules() {
        let hop = |status, post, sent| next_hop(&base(), "/next", status, post, sent);
        for status in [301, 302, 303] {
            assert!(!hop(status, true, 1).unwrap().post);
        }
        for status in [307, 308] {
            assert!(hop(status, true, 1).unwrap().post);
            assert!(!hop(status, false, 1).unwrap().post, "a GET stays a GET");
        }
        assert!(hop(307, true, 9).is_ok());
        assert_eq!(
            hop(307, true, 10).unwrap_err().detail,
            "Post \"/next\": stopped after 10 redirects"
        );
        let plain = next_hop(&base(), "http://127.0.0.1:80/x", 307, true, 1).unwrap();
        assert_eq!(plain.referer, None, "no Referer from https to http");
        assert_eq!(
            hop(307, true, 1).unwrap().referer.as_deref(),
            Some("https://127.0.0.1:8443/a/b/validate?timeout=10s")
        );
        assert_eq!(
            next_hop(&base(), "ftp://x/y", 302, true, 1)
                .unwrap_err()
                .detail,
            "Post \"ftp://x/y\": unsupported protocol scheme \"ftp\""
        );
        assert_eq!(
            next_hop(&base(), "https://h:x/", 302, true, 1)
                .unwrap_err()
                .detail,
            "Post \"https://127.0.0.1:8443/a/b/validate?timeout=10s\": failed to parse Location \
             header \"https://h:x/\": parse \"https://h:x/\": invalid port \":x\" after host"
        );
    }

    #[test]
    fn hop_requests_are_laid_out_as_go_writes_them() {
        let hop = next_hop(&base(), "/allow?x=1", 303, true, 1).unwrap();
        let mut out = Vec::new();
        encode_h1(&mut out, &hop, b"{}", &HeaderMap::new());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /allow?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8443\r\nUser-Agent: kube-apiserver-admission\r\n\
             Accept: application/json, */*\r\nContent-Type: application/json\r\n\
             Referer: https://127.0.0.1:8443/a/b/validate?timeout=10s\r\nAccept-Encoding: gzip\r\n\r\n"
        );
        let hop = next_hop(&base(), "http://localhost:81/p", 308, true, 1).unwrap();
        let mut out = Vec::new();
        encode_h1(&mut out, &hop, b"{}", &HeaderMap::new());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "POST /p HTTP/1.1\r\nHost: localhost:81\r\nUser-Agent: kube-apiserver-admission\r\n\
             Content-Length: 2\r\nAccept: application/json, */*\r\nContent-Type: application/json\r\n\
             Accept-Encoding: gzip\r\n\r\n{}"
        );
    }
}
