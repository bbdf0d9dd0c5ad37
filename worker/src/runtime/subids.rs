//! The ids a container's user namespace maps, so that programs which change user inside
//! (apt drops to `_apt`, dpkg and `adduser` chown to system users, npm and pip as root)
//! work as in Docker, while nothing inside is ever a host user that owns anything.
//!
//! The image's user (`User`, default root) is the unprivileged sandbox user
//! (`AKBENCH_SANDBOX_UID`/`GID`), as before: it owns the workspace, the copy-on-write layer
//! and (through the idmapped lower layer) the image's files. Every other id inside, `0` to
//! `count - 1`, is host id `base + id` of a range of subordinate ids that no host user owns
//! (`AKBENCH_SANDBOX_SUBIDS=BASE:COUNT`, default [`DEFAULT`]); the maps are written by the
//! root worker, as `newuidmap` writes them for rootless containers. [`maps`] is the pure
//! rule (table-tested); the namespace is made in [`super::container`].

/// The variable that sets the range: `BASE:COUNT`.
pub const VAR: &str = "AKBENCH_SANDBOX_SUBIDS";

/// The default range: 65536 ids from host id 1,000,000,000 (far above the ids distributions
/// give users, and above the 100000-based ranges `useradd` writes to `/etc/subuid`).
pub const DEFAULT: SubIds = SubIds {
    base: 1_000_000_000,
    count: 65_536,
};

/// A range of host ids: inside id `n` (other than the image's user) is host `base + n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubIds {
    /// The first host id of the range.
    pub base: u32,
    /// How many ids it has (inside ids `0..count`).
    pub count: u32,
}

/// The range `value` (`BASE:COUNT`; `None`: [`DEFAULT`]) names, refused when it holds host
/// id 0 or the sandbox user's `sandbox` id, is shorter than 2 ids or runs past the largest id.
pub fn parse(value: Option<&str>, sandbox: u32) -> Result<SubIds, String> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return check(DEFAULT, sandbox);
    };
    let bad = |why: &str| {
        format!("{VAR}=`{v}` {why}; fix: set it to BASE:COUNT, a range of host ids no user owns (e.g. 1000000000:65536)")
    };
    let (b, c) = v.split_once(':').ok_or_else(|| bad("is not BASE:COUNT"))?;
    let base = b.parse::<u32>().map_err(|_| bad("has no numeric BASE"))?;
    let count = c.parse::<u32>().map_err(|_| bad("has no numeric COUNT"))?;
    check(SubIds { base, count }, sandbox).map_err(|why| bad(&why))
}

fn check(r: SubIds, sandbox: u32) -> Result<SubIds, String> {
    let end = u64::from(r.base) + u64::from(r.count);
    if r.count < 2 {
        return Err("has fewer than 2 ids".into());
    }
    // u32::MAX is the kernel's invalid id.
    if end > u64::from(u32::MAX) {
        return Err("runs past the largest host id".into());
    }
    let holds = |id: u32| (u64::from(r.base)..end).contains(&u64::from(id));
    if holds(0) {
        return Err("holds host root (id 0)".into());
    }
    if holds(sandbox) {
        return Err(format!("holds the sandbox user's id {sandbox}"));
    }
    Ok(r)
}

/// The `uid_map` (or `gid_map`) text of a container: inside id `image` is host `sandbox`,
/// every other inside id below `range.count` is `range.base + id` (pure).
pub fn maps(image: u32, sandbox: u32, range: SubIds) -> String {
    let mut out = String::new();
    let line = |out: &mut String, inside: u32, host: u32, n: u32| {
        if n > 0 {
            out.push_str(&format!("{inside} {host} {n}\n"));
        }
    };
    if image >= range.count {
        // The image's user lies above the range: the range whole, then that user.
        line(&mut out, 0, range.base, range.count);
        line(&mut out, image, sandbox, 1);
        return out;
    }
    line(&mut out, 0, range.base, image);
    line(&mut out, image, sandbox, 1);
    line(
        &mut out,
        image + 1,
        range.base + image + 1,
        range.count - image - 1,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_user_is_the_sandbox_user_and_the_rest_is_the_range() {
        let r = SubIds {
            base: 1_000_000_000,
            count: 65_536,
        };
        let cases: &[(u32, &str)] = &[
            (0, "0 65534 1\n1 1000000001 65535\n"),
            (
                1000,
                "0 1000000000 1000\n1000 65534 1\n1001 1000001001 64535\n",
            ),
            (65_535, "0 1000000000 65535\n65535 65534 1\n"),
            (100_000, "0 1000000000 65536\n100000 65534 1\n"),
        ];
        for (image, want) in cases {
            assert_eq!(maps(*image, 65534, r), *want, "image user {image}");
        }
    }

    #[test]
    fn a_range_holding_root_or_the_sandbox_user_is_refused_naming_the_variable() {
        type Want = Result<SubIds, &'static str>;
        let cases: &[(Option<&str>, Want)] = &[
            (None, Ok(DEFAULT)),
            (Some(" "), Ok(DEFAULT)),
            (
                Some("200000:65536"),
                Ok(SubIds {
                    base: 200_000,
                    count: 65_536,
                }),
            ),
            (Some("0:65536"), Err("holds host root")),
            (Some("1:65536"), Err("holds the sandbox user's id 65534")),
            (Some("200000"), Err("is not BASE:COUNT")),
            (Some("x:1"), Err("no numeric BASE")),
            (Some("5:y"), Err("no numeric COUNT")),
            (Some("200000:1"), Err("fewer than 2 ids")),
            (Some("4294967000:65536"), Err("past the largest host id")),
        ];
        for (v, want) in cases {
            match (parse(*v, 65534), want) {
                (Ok(g), Ok(w)) => assert_eq!(g, *w, "{v:?}"),
                (Err(g), Err(w)) => {
                    assert!(
                        g.contains(w) && g.contains(VAR) && g.contains("fix:"),
                        "{g}"
                    )
                }
                (g, w) => panic!("{v:?}: {g:?} vs {w:?}"),
            }
        }
    }
}
