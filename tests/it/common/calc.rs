//! `calc/ops.py`'s functions that the model tests (`evaluate`, `serve`, `dating`) share, one
//! macro each that expands to the function's text (ending in a newline): literals, so that a
//! test's fixture is `concat!`ed from them with the functions of its own.

/// `LIMIT` and `clamp(x, lo, hi)`.
macro_rules! calc_clamp {
    () => {
        r#"LIMIT = 100

def clamp(x, lo, hi):
    """Clamp x to the range from lo to hi."""
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x
"#
    };
}
pub(crate) use calc_clamp;

/// `add_small(a, b)`, capped at `LIMIT`.
macro_rules! calc_add_small {
    () => {
        r#"def add_small(a, b):
    """Add two numbers, capping the result at LIMIT."""
    total = a + b
    if total > LIMIT:
        return LIMIT
    return total
"#
    };
}
pub(crate) use calc_add_small;

/// `scale(a, b)`: the magnitude of a times b, plus a.
macro_rules! calc_scale {
    () => {
        r#"def scale(a, b):
    """The magnitude of a times b, plus a."""
    result = a * b
    if result < 0:
        result = -result
    return result + a
"#
    };
}
pub(crate) use calc_scale;

/// `peek(a, b)`: the larger of a and b, doubled.
macro_rules! calc_peek {
    () => {
        r#"def peek(a, b):
    """The larger of a and b, doubled."""
    if a > b:
        return 2 * a
    return 2 * b
"#
    };
}
pub(crate) use calc_peek;
