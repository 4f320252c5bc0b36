//! cel-go's string extension functions (`ext/strings.go`, the version the apiserver vendors)
//! whose errors or bounds the CEL library treats otherwise: `charAt`, `substring` and
//! `lastIndexOf`; and the `string()` conversions of a double (Go's `%g`) and of a bool, which
//! the CEL library prints otherwise or lacks.

use std::sync::Arc;

use kube_cel::cel;

use cel::extractors::{Arguments, This};
use cel::{FunctionContext, ResolveResult, Value};

/// Registers the functions in `ctx`, in place of the dependency's.
pub(super) fn register(ctx: &mut cel::Context<'_>) {
    ctx.add_function("charAt", char_at);
    ctx.add_function("substring", substring);
    ctx.add_function("lastIndexOf", last_index_of);
    ctx.add_function("string", string);
}

/// `string(x)`: cel-go's `%g` of a double and `strconv.FormatBool` of a bool; the rest as the
/// CEL library converts it.
fn string(ftx: &FunctionContext) -> ResolveResult {
    let (this, args) = super::netip::values(ftx)?;
    match (&this, args.as_slice()) {
        (None, [Value::Float(f)]) => Ok(Value::String(Arc::new(crate::gofmt::format_float_g(*f)))),
        (None, [Value::Bool(b)]) => Ok(Value::String(Arc::new(b.to_string()))),
        _ => super::call_dependency("string", this, args),
    }
}

fn out_of_range(ftx: &FunctionContext, index: i64) -> cel::ExecutionError {
    ftx.error(format!("index out of range: {index}"))
}

/// `charAt`: the character at a code point index; `''` at the end.
fn char_at(ftx: &FunctionContext, This(this): This<Arc<String>>, index: i64) -> ResolveResult {
    let chars: Vec<char> = this.chars().collect();
    match usize::try_from(index) {
        Ok(i) if i < chars.len() => Ok(Value::String(Arc::new(chars[i].to_string()))),
        Ok(i) if i == chars.len() => Ok(Value::String(Arc::new(String::new()))),
        _ => Err(out_of_range(ftx, index)),
    }
}

/// `substring(start)` and `substring(start, end)`, by code points.
fn substring(
    ftx: &FunctionContext,
    This(this): This<Arc<String>>,
    Arguments(args): Arguments,
) -> ResolveResult {
    let chars: Vec<char> = this.chars().collect();
    let int = |v: Option<&Value>| match v {
        Some(Value::Int(i)) => Ok(*i),
        _ => Err(ftx.error("no such overload")),
    };
    let start = int(args.first())?;
    let end = match args.len() {
        1 => None,
        2 => Some(int(args.get(1))?),
        _ => return Err(ftx.error("no such overload")),
    };
    if let Some(end) = end
        && start > end
    {
        return Err(ftx.error(format!(
            "invalid substring range. start: {start}, end: {end}"
        )));
    }
    let index = |i: i64| {
        usize::try_from(i)
            .ok()
            .filter(|i| *i <= chars.len())
            .ok_or_else(|| out_of_range(ftx, i))
    };
    let from = index(start)?;
    let to = match end {
        Some(end) => index(end)?,
        None => chars.len(),
    };
    Ok(Value::String(Arc::new(chars[from..to].iter().collect())))
}

/// `lastIndexOf` of a string (cel-go's `lastIndexOfOffset`: a negative offset is out of range,
/// an offset past the end finds nothing, the empty string is found at the offset) or of a list
/// (the last element equal to the argument, the Kubernetes lists library).
fn last_index_of(
    ftx: &FunctionContext,
    This(this): This<Value>,
    Arguments(args): Arguments,
) -> ResolveResult {
    let found = |i: usize| Ok(Value::Int(i64::try_from(i).unwrap_or(i64::MAX)));
    match (&this, args.as_slice()) {
        (Value::List(list), [item]) => match list.iter().rposition(|v| v == item) {
            Some(i) => found(i),
            None => Ok(Value::Int(-1)),
        },
        (Value::String(s), [Value::String(sub)]) => {
            let len = s.chars().count();
            if sub.is_empty() {
                return found(len);
            }
            last_index_from(ftx, s, sub, i64::try_from(len).unwrap_or(i64::MAX) - 1)
        }
        (Value::String(s), [Value::String(sub), Value::Int(offset)]) => {
            if sub.is_empty() {
                return Ok(Value::Int(*offset));
            }
            last_index_from(ftx, s, sub, *offset)
        }
        _ => Err(ftx.error("no such overload")),
    }
}

fn last_index_from(ftx: &FunctionContext, s: &str, sub: &str, offset: i64) -> ResolveResult {
    let runes: Vec<char> = s.chars().collect();
    let sub: Vec<char> = sub.chars().collect();
    let Ok(off) = usize::try_from(offset) else {
        return Err(out_of_range(ftx, offset));
    };
    if off >= runes.len() || sub.len() > runes.len() {
        return Ok(Value::Int(-1));
    }
    let start = off.min(runes.len() - sub.len());
    Ok(Value::Int(
        (0..=start)
            .rev()
            .find(|&i| runes[i..i + sub.len()] == sub[..])
            .map_or(-1, |i| i64::try_from(i).unwrap_or(i64::MAX)),
    ))
}
