//! The image pull policy a container (or an image volume) gets by default: `Always` when the image
//! reference's tag is `latest` — written or implied by a reference with neither tag nor digest —
//! and `IfNotPresent` otherwise, including for a reference that does not parse (the apiserver
//! ignores the parse error there and leaves validation to report it).
//!
//! The parse is the one kube-apiserver uses (`ParseNormalizedNamed` of the distribution reference
//! library, then its reference grammar), reduced to what decides the tag.

const NAME_TOTAL_LENGTH_MAX: usize = 255;

/// `Always` or `IfNotPresent` for the image reference `image`.
pub(super) fn default_pull_policy(image: &str) -> &'static str {
    if !may_be_latest(image) {
        return "IfNotPresent";
    }
    if tag(image).as_deref() == Some("latest") {
        "Always"
    } else {
        "IfNotPresent"
    }
}

/// Whether the reference's tag can be `latest` at all, read without parsing it: not when it
/// names another tag (a `:` after its last `/`, before any `@`), nor when it has a digest and no
/// tag. Whether it is valid decides only between `latest` and no tag, both `IfNotPresent` here.
fn may_be_latest(image: &str) -> bool {
    let (name, digest) = match image.split_once('@') {
        Some((name, _)) => (name, true),
        None => (image, false),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.rsplit_once(':') {
        Some((_, tag)) => tag == "latest",
        None => !digest,
    }
}

/// The tag of a reference: its own, `latest` when it has neither tag nor digest, `Some("")` when
/// it has only a digest, `None` when it does not parse.
fn tag(image: &str) -> Option<String> {
    if image.len() == 64
        && image
            .bytes()
            .all(|b| matches!(b, b'a'..=b'f' | b'0'..=b'9'))
    {
        return None;
    }
    let (domain, remainder) = split_docker_domain(image);
    let remote_name = remainder.split(':').next().unwrap_or("");
    if remote_name.to_lowercase() != remote_name {
        return None;
    }
    let full = format!("{domain}/{remainder}");
    let (name_and_tag, digest) = match full.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (full.as_str(), None),
    };
    if let Some(d) = digest
        && !valid_digest(d)
    {
        return None;
    }
    let last_slash = name_and_tag.rfind('/').unwrap_or(0);
    let (name, tag) = match name_and_tag.rfind(':') {
        Some(i) if i > last_slash => (&name_and_tag[..i], Some(&name_and_tag[i + 1..])),
        _ => (name_and_tag, None),
    };
    if !valid_name(name) || name.len() > NAME_TOTAL_LENGTH_MAX {
        return None;
    }
    match tag {
        Some(t) if valid_tag(t) => Some(t.to_string()),
        Some(_) => None,
        None if digest.is_some() => Some(String::new()),
        None => Some("latest".to_string()),
    }
}

fn split_docker_domain(name: &str) -> (&str, String) {
    let (domain, remainder) = match name.find('/') {
        Some(i)
            if name[..i].contains(['.', ':'])
                || &name[..i] == "localhost"
                || name[..i].to_lowercase() != name[..i] =>
        {
            (&name[..i], &name[i + 1..])
        }
        _ => ("docker.io", name),
    };
    let domain = if domain == "index.docker.io" {
        "docker.io"
    } else {
        domain
    };
    if domain == "docker.io" && !remainder.contains('/') {
        (domain, format!("library/{remainder}"))
    } else {
        (domain, remainder.to_string())
    }
}

/// `[domain/]path-component(/path-component)*`, where the first segment may be a domain.
fn valid_name(name: &str) -> bool {
    let mut segments = name.split('/');
    let first = segments.next().unwrap_or("");
    let rest: Vec<&str> = segments.collect();
    let first_ok = if rest.is_empty() {
        valid_path_component(first)
    } else {
        valid_domain(first) || valid_path_component(first)
    };
    first_ok && rest.iter().all(|s| valid_path_component(s))
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
fn valid_path_component(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let mut i = 0;
    loop {
        let start = i;
        while i < b.len() && alnum(b[i]) {
            i += 1;
        }
        if i == start {
            return false;
        }
        if i == b.len() {
            return true;
        }
        let sep_start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &s[sep_start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|c| c == b'-')) {
            return false;
        }
    }
}

/// `host[:port]`, host a dotted name of `[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?` components or a
/// bracketed IPv6 address.
fn valid_domain(s: &str) -> bool {
    let (host_ok, port) = if let Some(rest) = s.strip_prefix('[') {
        let Some((v6, after)) = rest.split_once(']') else {
            return false;
        };
        let v6_ok = !v6.is_empty() && v6.bytes().all(|c| c.is_ascii_hexdigit() || c == b':');
        match after {
            "" => (v6_ok, None),
            _ => match after.strip_prefix(':') {
                Some(p) => (v6_ok, Some(p)),
                None => return false,
            },
        }
    } else {
        let (host, port) = match s.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        };
        (host.split('.').all(valid_domain_component), port)
    };
    host_ok && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
}

fn valid_domain_component(c: &str) -> bool {
    let b = c.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|&x| x.is_ascii_alphanumeric() || x == b'-')
}

/// `[\w][\w.-]{0,127}`
fn valid_tag(t: &str) -> bool {
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let b = t.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && word(b[0])
        && b.iter().all(|&c| word(c) || c == b'.' || c == b'-')
}

/// A digest the reference library accepts: the grammar, then an algorithm it knows with an
/// encoding of that algorithm's length in lowercase hex.
fn valid_digest(d: &str) -> bool {
    let Some((algorithm, encoded)) = d.split_once(':') else {
        return false;
    };
    let length = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return false,
    };
    encoded.len() == length
        && encoded
            .bytes()
            .all(|c| matches!(c, b'a'..=b'f' | b'0'..=b'9'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_follows_the_tag() {
        let digest = format!("sha256:{}", "a".repeat(64));
        for (image, policy) in [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.27", "IfNotPresent"),
            ("registry.example.com:5000/team/app", "Always"),
            ("registry.example.com:5000/team/app:latest", "Always"),
            ("registry.example.com:5000/team/app:v2", "IfNotPresent"),
            ("localhost/app", "Always"),
            ("[::1]:5000/app:latest", "Always"),
            (&format!("nginx@{digest}"), "IfNotPresent"),
            (&format!("nginx:latest@{digest}"), "Always"),
            ("nginx:latest@sha256:abc", "IfNotPresent"),
            ("", "IfNotPresent"),
            ("Nginx", "IfNotPresent"),
            ("nginx:", "IfNotPresent"),
            ("nginx:-bad", "IfNotPresent"),
            (&"a".repeat(64), "IfNotPresent"),
        ] {
            assert_eq!(default_pull_policy(image), policy, "{image}");
        }
    }

    #[test]
    fn references_that_cannot_be_latest_are_told_without_parsing() {
        let digest = format!("sha256:{}", "b".repeat(64));
        let parts = [
            "",
            "nginx",
            "Nginx",
            "a.b",
            "localhost",
            "host:5000",
            "[::1]:5000",
            "team",
            "app-0",
            "UPPER",
            "x_y",
            "-bad",
            "a".repeat(64).leak(),
        ];
        let tags = ["", ":", ":latest", ":LATEST", ":v1.2", ":latest:x", ":-bad"];
        let digests = [
            String::new(),
            format!("@{digest}"),
            "@sha256:abc".into(),
            "@".into(),
        ];
        for a in parts {
            for b in parts {
                for t in tags {
                    for d in &digests {
                        for image in [format!("{a}{t}{d}"), format!("{a}/{b}{t}{d}")] {
                            let parsed = if tag(&image).as_deref() == Some("latest") {
                                "Always"
                            } else {
                                "IfNotPresent"
                            };
                            assert_eq!(default_pull_policy(&image), parsed, "{image}");
                        }
                    }
                }
            }
        }
    }
}
