//! The parse errors of Go's `net/netip` (`ParseAddr`, `ParsePrefix`), as the Kubernetes `ip`
//! and `cidr` libraries (`k8s.io/apiserver/pkg/cel/library/{ip,cidr}.go`) wrap them, and the
//! library functions that report them in place of the CEL library's own texts. The values
//! themselves stay the CEL library's: a string these functions accept is handed to it.

use kube_cel::cel;

use cel::{ExecutionError, FunctionContext, ResolveResult, Value};

use super::call_dependency;

/// What a successful `ParseAddr` tells the library: whether the address had a zone, and
/// whether it is an IPv4-mapped IPv6 address.
struct Parsed {
    zone: bool,
    four_in_six: bool,
    six: bool,
}

/// Go's `strconv.Quote` for the strings these errors quote (printable text as it stands).
fn quote(s: &str) -> String {
    crate::gofmt::quote(s)
}

fn addr_error(input: &str, msg: &str, at: Option<&str>) -> String {
    match at {
        Some(at) if !at.is_empty() => {
            format!("ParseAddr({}): {msg} (at {})", quote(input), quote(at))
        }
        _ => format!("ParseAddr({}): {msg}", quote(input)),
    }
}

/// `parseIPv4Fields` over `input[off..end]`.
fn ipv4_fields(input: &str, off: usize, end: usize) -> Result<[u8; 4], String> {
    let s = &input.as_bytes()[off..end];
    let text = &input[off..end];
    let mut fields = [0u8; 4];
    let (mut val, mut pos, mut digits) = (0u32, 0usize, 0usize);
    for (i, &c) in s.iter().enumerate() {
        if c.is_ascii_digit() {
            if digits == 1 && val == 0 {
                return Err(addr_error(
                    input,
                    "IPv4 field has octet with leading zero",
                    None,
                ));
            }
            val = val * 10 + u32::from(c - b'0');
            digits += 1;
            if val > 255 {
                return Err(addr_error(input, "IPv4 field has value >255", None));
            }
        } else if c == b'.' {
            if i == 0 || i == s.len() - 1 || s[i - 1] == b'.' {
                return Err(addr_error(
                    input,
                    "IPv4 field must have at least one digit",
                    Some(&text[i..]),
                ));
            }
            if pos == 3 {
                return Err(addr_error(input, "IPv4 address too long", None));
            }
            fields[pos] = u8::try_from(val).unwrap_or(u8::MAX);
            pos += 1;
            val = 0;
            digits = 0;
        } else {
            return Err(addr_error(input, "unexpected character", text.get(i..)));
        }
    }
    if pos < 3 {
        return Err(addr_error(input, "IPv4 address too short", None));
    }
    fields[3] = u8::try_from(val).unwrap_or(u8::MAX);
    Ok(fields)
}

/// `parseIPv6`: the 16 bytes and whether a zone was given.
fn ipv6(input: &str) -> Result<([u8; 16], bool), String> {
    let (mut s, zone) = match input.find('%') {
        Some(i) => {
            if input.len() == i + 1 {
                return Err(addr_error(input, "zone must be a non-empty string", None));
            }
            (&input[..i], Some(&input[i + 1..]))
        }
        None => (input, None),
    };
    let mut ip = [0u8; 16];
    let mut ellipsis: Option<usize> = None;
    if s.starts_with("::") {
        ellipsis = Some(0);
        s = &s[2..];
        if s.is_empty() {
            return Ok((ip, zone.is_some()));
        }
    }
    let mut i = 0usize;
    while i < 16 {
        let b = s.as_bytes();
        let mut off = 0usize;
        let mut acc = 0u32;
        while off < b.len() {
            let c = b[off];
            let digit = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => break,
            };
            acc = (acc << 4) + u32::from(digit);
            if off > 3 {
                return Err(addr_error(
                    input,
                    "each group must have 4 or less digits",
                    Some(s),
                ));
            }
            if acc > u32::from(u16::MAX) {
                return Err(addr_error(input, "IPv6 field has value >=2^16", Some(s)));
            }
            off += 1;
        }
        if off == 0 {
            return Err(addr_error(
                input,
                "each colon-separated field must have at least one digit",
                Some(s),
            ));
        }
        if off < b.len() && b[off] == b'.' {
            if ellipsis.is_none() && i != 12 {
                return Err(addr_error(
                    input,
                    "embedded IPv4 address must replace the final 2 fields of the address",
                    Some(s),
                ));
            }
            if i + 4 > 16 {
                return Err(addr_error(
                    input,
                    "too many hex fields to fit an embedded IPv4 at the end of the address",
                    Some(s),
                ));
            }
            let end = input.len() - zone.map_or(0, |z| z.len() + 1);
            let four = ipv4_fields(input, end - s.len(), end)?;
            ip[i..i + 4].copy_from_slice(&four);
            s = "";
            i += 4;
            break;
        }
        let [hi, lo] = u16::try_from(acc).unwrap_or(u16::MAX).to_be_bytes();
        ip[i] = hi;
        ip[i + 1] = lo;
        i += 2;
        s = &s[off..];
        if s.is_empty() {
            break;
        }
        if !s.starts_with(':') {
            return Err(addr_error(
                input,
                "unexpected character, want colon",
                Some(s),
            ));
        } else if s.len() == 1 {
            return Err(addr_error(
                input,
                "colon must be followed by more characters",
                Some(s),
            ));
        }
        s = &s[1..];
        if s.starts_with(':') {
            if ellipsis.is_some() {
                return Err(addr_error(input, "multiple :: in address", Some(s)));
            }
            ellipsis = Some(i);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return Err(addr_error(input, "trailing garbage after address", Some(s)));
    }
    if i < 16 {
        let Some(at) = ellipsis else {
            return Err(addr_error(input, "address string too short", None));
        };
        let n = 16 - i;
        ip.copy_within(at..i, at + n);
        ip[at..at + n].fill(0);
    } else if ellipsis.is_some() {
        return Err(addr_error(
            input,
            "the :: must expand to at least one field of zeros",
            None,
        ));
    }
    Ok((ip, zone.is_some()))
}

/// Go's `netip.ParseAddr`.
fn parse_addr(s: &str) -> Result<Parsed, String> {
    for c in s.bytes() {
        match c {
            b'.' => {
                return ipv4_fields(s, 0, s.len()).map(|_| Parsed {
                    zone: false,
                    four_in_six: false,
                    six: false,
                });
            }
            b':' => {
                return ipv6(s).map(|(ip, zone)| Parsed {
                    zone,
                    four_in_six: ip[..10].iter().all(|b| *b == 0) && ip[10..12] == [0xff, 0xff],
                    six: true,
                });
            }
            b'%' => return Err(addr_error(s, "missing IPv6 address", None)),
            _ => {}
        }
    }
    Err(addr_error(s, "unable to parse IP", None))
}

/// The error of the library's `parseIPAddr` for `raw`, if any.
pub(super) fn ip_error(raw: &str) -> Option<String> {
    match parse_addr(raw) {
        Err(e) => Some(format!(
            "IP Address {} parse error during conversion from string: {e}",
            quote(raw)
        )),
        Ok(p) if p.zone => Some(format!(
            "IP address {} with zone value is not allowed",
            quote(raw)
        )),
        Ok(p) if p.four_in_six => Some(format!(
            "IPv4-mapped IPv6 address {} is not allowed",
            quote(raw)
        )),
        Ok(_) => None,
    }
}

/// Go's `netip.ParsePrefix`: whether the address is IPv4-mapped.
fn parse_prefix(s: &str) -> Result<bool, String> {
    let error = |msg: &str| format!("netip.ParsePrefix({}): {msg}", quote(s));
    let Some(i) = s.rfind('/') else {
        return Err(error("no '/'"));
    };
    let ip = parse_addr(&s[..i]).map_err(|e| error(&e))?;
    if ip.six && ip.zone {
        return Err(error("IPv6 zones cannot be present in a prefix"));
    }
    let bits = &s[i + 1..];
    let bad = || error(&format!("bad bits after slash: {}", quote(bits)));
    let b = bits.as_bytes();
    if b.len() > 1 && !(b'1'..=b'9').contains(&b[0]) {
        return Err(bad());
    }
    // strconv.Atoi: an optional sign, then decimal digits that fit an int.
    let digits = bits.strip_prefix(['+', '-']).unwrap_or(bits);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let n: i64 = bits.parse().map_err(|_| bad())?;
    let max = if ip.six { 128 } else { 32 };
    if !(0..=max).contains(&n) {
        return Err(error("prefix length out of range"));
    }
    Ok(ip.four_in_six)
}

/// The error of the library's `stringToCIDR` for `raw`, if any (its `parseCIDR` error wrapped
/// once more, as upstream prints it).
pub(super) fn cidr_error(raw: &str) -> Option<String> {
    const PARSE: &str = "network address parse error during conversion from string";
    match parse_prefix(raw) {
        Err(e) => Some(format!("{PARSE}: {PARSE}: {e}")),
        Ok(true) => Some(format!(
            "IPv4-mapped IPv6 address {} is not allowed",
            quote(raw)
        )),
        Ok(false) => None,
    }
}

/// The receiver and the arguments of a call, evaluated.
pub(super) fn values(ftx: &FunctionContext) -> Result<(Option<Value>, Vec<Value>), ExecutionError> {
    let args = ftx
        .args
        .iter()
        .map(|a| ftx.ptx.resolve(a))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((ftx.this.clone(), args))
}

/// A function whose string argument `check` may refuse with upstream's text first.
fn checked(ftx: &FunctionContext, name: &str, check: fn(&str) -> Option<String>) -> ResolveResult {
    let (this, args) = values(ftx)?;
    if this.is_none()
        && let [Value::String(s)] = args.as_slice()
        && let Some(e) = check(s)
    {
        return Err(ftx.error(e));
    }
    call_dependency(name, this, args)
}

fn ip(ftx: &FunctionContext) -> ResolveResult {
    checked(ftx, "ip", ip_error)
}

fn ip_is_canonical(ftx: &FunctionContext) -> ResolveResult {
    checked(ftx, "ip.isCanonical", ip_error)
}

fn cidr(ftx: &FunctionContext) -> ResolveResult {
    checked(ftx, "cidr", cidr_error)
}

/// `<Quantity>.isInteger()`: upstream's `AsInt64` succeeds (the CEL library's answers `true`
/// for an integer beyond int64).
fn is_integer(ftx: &FunctionContext) -> ResolveResult {
    let (this, args) = values(ftx)?;
    match call_dependency("asInteger", this.clone(), args.clone()) {
        Ok(_) => Ok(Value::Bool(true)),
        Err(_) => call_dependency("isInteger", this, args).map(|_| Value::Bool(false)),
    }
}

/// Registers the functions in `ctx`, in place of the dependency's.
pub(super) fn register(ctx: &mut cel::Context<'_>) {
    ctx.add_function("ip", ip);
    ctx.add_function("ip.isCanonical", ip_is_canonical);
    ctx.add_function("cidr", cidr);
    ctx.add_function("isInteger", is_integer);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's `netip.ParseAddr` errors (`net/netip` tests' invalid inputs, as Go 1.24 prints them).
    #[test]
    fn parse_addr_errors_are_go_texts() {
        for (input, want) in [
            ("", "ParseAddr(\"\"): unable to parse IP"),
            ("1.2.3", "ParseAddr(\"1.2.3\"): IPv4 address too short"),
            (
                "01.2.3.4",
                "ParseAddr(\"01.2.3.4\"): IPv4 field has octet with leading zero",
            ),
            (
                "1.2.3.256",
                "ParseAddr(\"1.2.3.256\"): IPv4 field has value >255",
            ),
            (
                "1..2.3",
                "ParseAddr(\"1..2.3\"): IPv4 field must have at least one digit (at \".2.3\")",
            ),
            (
                "1.2.3.4x",
                "ParseAddr(\"1.2.3.4x\"): unexpected character (at \"x\")",
            ),
            ("%eth0", "ParseAddr(\"%eth0\"): missing IPv6 address"),
            (
                "fe80::1%",
                "ParseAddr(\"fe80::1%\"): zone must be a non-empty string",
            ),
            ("1:2", "ParseAddr(\"1:2\"): address string too short"),
            (
                "1::2::3",
                "ParseAddr(\"1::2::3\"): multiple :: in address (at \":3\")",
            ),
            (
                "12345::",
                "ParseAddr(\"12345::\"): each group must have 4 or less digits (at \"12345::\")",
            ),
            (
                "1:2:3:4:5:6:7:8::",
                "ParseAddr(\"1:2:3:4:5:6:7:8::\"): the :: must expand to at least one field of zeros",
            ),
            (
                "1:2:3:4:5:6:7:8:9",
                "ParseAddr(\"1:2:3:4:5:6:7:8:9\"): trailing garbage after address (at \"9\")",
            ),
            (
                "1:2:1.2.3.4",
                "ParseAddr(\"1:2:1.2.3.4\"): embedded IPv4 address must replace the final 2 fields of the address (at \"1.2.3.4\")",
            ),
            (
                "1:2:",
                "ParseAddr(\"1:2:\"): colon must be followed by more characters (at \":\")",
            ),
            (
                "1:2x",
                "ParseAddr(\"1:2x\"): unexpected character, want colon (at \"x\")",
            ),
        ] {
            assert_eq!(parse_addr(input).err().as_deref(), Some(want), "{input}");
        }
        for ok in [
            "::",
            "::1",
            "1.2.3.4",
            "2001:db8::68",
            "::ffff:1.2.3.4",
            "fe80::1%eth0",
        ] {
            assert!(parse_addr(ok).is_ok(), "{ok}");
        }
        assert!(parse_addr("::ffff:1.2.3.4").unwrap().four_in_six);
        assert!(parse_addr("fe80::1%eth0").unwrap().zone);
    }

    #[test]
    fn parse_prefix_errors_are_go_texts() {
        for (input, want) in [
            ("1.2.3.4", "netip.ParsePrefix(\"1.2.3.4\"): no '/'"),
            (
                "1.2.3.4/",
                "netip.ParsePrefix(\"1.2.3.4/\"): bad bits after slash: \"\"",
            ),
            (
                "1.2.3.4/08",
                "netip.ParsePrefix(\"1.2.3.4/08\"): bad bits after slash: \"08\"",
            ),
            (
                "1.2.3.4/-1",
                "netip.ParsePrefix(\"1.2.3.4/-1\"): bad bits after slash: \"-1\"",
            ),
            (
                "1.2.3.4/33",
                "netip.ParsePrefix(\"1.2.3.4/33\"): prefix length out of range",
            ),
            (
                "fe80::%eth0/64",
                "netip.ParsePrefix(\"fe80::%eth0/64\"): IPv6 zones cannot be present in a prefix",
            ),
            (
                "1.2.3/8",
                "netip.ParsePrefix(\"1.2.3/8\"): ParseAddr(\"1.2.3\"): IPv4 address too short",
            ),
        ] {
            assert_eq!(parse_prefix(input).err().as_deref(), Some(want), "{input}");
        }
        assert_eq!(parse_prefix("10.0.0.0/8"), Ok(false));
        assert_eq!(parse_prefix("::ffff:1.2.3.4/128"), Ok(true));
        assert_eq!(parse_prefix("0.0.0.0/0"), Ok(false));
    }
}
