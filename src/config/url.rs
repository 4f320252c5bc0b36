//! The parts of Go's `net/url.Parse` that webhook URL validation looks at, with Go's error texts.

/// A parsed URL: only what `ValidateWebhookURL` inspects.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct GoUrl {
    pub scheme: String,
    pub user: Option<String>,
    pub host: String,
    pub raw_query: String,
    pub fragment: String,
}

/// `url.Parse(raw)`; the error is Go's `parse "<raw>": <reason>`.
pub(crate) fn parse(raw: &str) -> Result<GoUrl, String> {
    let fail = |reason: &str| {
        Err(format!(
            "parse {}: {reason}",
            super::validation::go_quote(raw)
        ))
    };
    let (rest, fragment) = match raw.split_once('#') {
        Some((r, f)) => (r, f),
        None => (raw, ""),
    };
    let fragment = match unescape(fragment, false) {
        Ok(f) => f,
        Err(e) => return fail(&e),
    };
    if rest.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return fail("net/url: invalid control character in URL");
    }
    let mut url = GoUrl {
        fragment,
        ..GoUrl::default()
    };
    if rest == "*" {
        return Ok(url);
    }
    let (scheme, mut rest) = match scheme(rest) {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    url.scheme = scheme.to_ascii_lowercase();
    if let Some((r, q)) = rest.split_once('?') {
        url.raw_query = if rest.ends_with('?') && rest.matches('?').count() == 1 {
            String::new()
        } else {
            q.to_string()
        };
        rest = r;
    }
    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            return Ok(url);
        }
        let segment = rest.split('/').next().unwrap_or_default();
        if segment.contains(':') {
            return fail("first path segment in URL cannot contain colon");
        }
    }
    if (!url.scheme.is_empty() || !rest.starts_with("///")) && rest.starts_with("//") {
        let after = &rest[2..];
        let authority = after.split('/').next().unwrap_or_default();
        let host = match authority.rfind('@') {
            Some(i) => {
                let userinfo = &authority[..i];
                if !valid_userinfo(userinfo) {
                    return fail("net/url: invalid userinfo");
                }
                url.user = Some(userinfo.to_string());
                &authority[i + 1..]
            }
            None => authority,
        };
        match parse_host(host) {
            Ok(h) => url.host = h,
            Err(e) => return fail(&e),
        }
        let path = &after[authority.len()..];
        if let Err(e) = unescape(path, false) {
            return fail(&e);
        }
    } else if let Err(e) = unescape(rest, false) {
        return fail(&e);
    }
    Ok(url)
}

/// `getScheme`.
fn scheme(raw: &str) -> Result<(&str, &str), &'static str> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' => return Ok(("", raw)),
            b':' if i == 0 => return Err("missing protocol scheme"),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

fn valid_userinfo(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(c) || !c.is_ascii())
}

/// `parseHost`: brackets for IPv6, an optional numeric port, no characters Go refuses in hosts.
fn parse_host(host: &str) -> Result<String, String> {
    let port_ok = |p: &str| {
        p.is_empty() || (p.starts_with(':') && p[1..].bytes().all(|b| b.is_ascii_digit()))
    };
    if host.starts_with('[') {
        let Some(i) = host.rfind(']') else {
            return Err("missing ']' in host".into());
        };
        let port = &host[i + 1..];
        if !port_ok(port) {
            return Err(format!(
                "invalid port {} after host",
                super::validation::go_quote(port)
            ));
        }
    } else if let Some(i) = host.rfind(':') {
        let port = &host[i..];
        if !port_ok(port) {
            return Err(format!(
                "invalid port {} after host",
                super::validation::go_quote(port)
            ));
        }
    }
    for c in host.chars() {
        let ok =
            c.is_ascii_alphanumeric() || "-_.~!$&'()*+,;=:[]<>\"%".contains(c) || !c.is_ascii();
        if !ok {
            return Err(format!(
                "invalid character {} in host name",
                super::validation::go_quote(&c.to_string())
            ));
        }
    }
    unescape(host, true)
}

/// Checks `%XX` escapes as Go's `unescape` does and returns the text unchanged otherwise.
fn unescape(s: &str, host: bool) -> Result<String, String> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let ok =
                i + 2 < b.len() && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit();
            if !ok {
                let end = (i + 3).min(b.len());
                let bad = String::from_utf8_lossy(&b[i..end]).into_owned();
                return Err(format!(
                    "invalid URL escape {}",
                    super::validation::go_quote(&bad)
                ));
            }
            if host && &s[i..i + 3] != "%25" && !s[..i].contains('[') {
                let bad = &s[i..i + 3];
                return Err(format!(
                    "invalid URL escape {}",
                    super::validation::go_quote(bad)
                ));
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_go() {
        let u = parse("https://user:pw@example.com:8443/p?q=1#frag").unwrap();
        assert_eq!(u.scheme, "https");
        assert_eq!(u.user.as_deref(), Some("user:pw"));
        assert_eq!(u.host, "example.com:8443");
        assert_eq!(u.raw_query, "q=1");
        assert_eq!(u.fragment, "frag");
        assert_eq!(parse("http:foo").unwrap().host, "");
        assert_eq!(
            parse("://x").unwrap_err(),
            "parse \"://x\": missing protocol scheme"
        );
        assert_eq!(
            parse("https://a b/").unwrap_err(),
            "parse \"https://a b/\": invalid character \" \" in host name"
        );
        assert_eq!(
            parse("https://h:x/").unwrap_err(),
            "parse \"https://h:x/\": invalid port \":x\" after host"
        );
        assert_eq!(parse("a:b/c").unwrap().scheme, "a");
        assert_eq!(parse("").unwrap(), GoUrl::default());
        assert_eq!(
            parse("https://h/%zz").unwrap_err(),
            "parse \"https://h/%zz\": invalid URL escape \"%zz\""
        );
    }
}
