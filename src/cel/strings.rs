//! cel-go's string extension functions (`ext/strings.go`, the version the apiserver vendors)
//! whose errors the CEL library words otherwise: `charAt` and `substring`.

use std::sync::Arc;

use kube_cel::cel;

use cel::extractors::{Arguments, This};
use cel::{FunctionContext, ResolveResult, Value};

/// Registers the functions in `ctx`, in place of the dependency's.
pub(super) fn register(ctx: &mut cel::Context<'_>) {
    ctx.add_function("charAt", char_at);
    ctx.add_function("substring", substring);
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
