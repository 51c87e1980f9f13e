//! Glob matching of interface names: `*` matches any run of characters (also none), `?`
//! exactly one; every other character matches itself. No character classes or escapes:
//! interface names rarely need them, and `[` is a legal character of a name.
//!
//! Invariant: linear in `pattern.len() * name.len()` at worst (the classic two-pointer
//! match with one backtrack point), no allocation, no recursion.

/// Whether `name` matches `pattern` as a whole.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0usize, 0usize);
    // Where the last `*` was and where in `name` it started matching.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some(b'*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(&c) if c == b'?' || Some(&c) == n.get(ni) => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                // Let the last `*` swallow one more character and try again.
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p.get(pi..)
        .is_some_and(|rest| rest.iter().all(|&c| c == b'*'))
}
