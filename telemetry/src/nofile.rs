//! The open-files limit of a long-running akbench process (the coordinator, the worker
//! daemon): a coordinator holds a socket per worker session and per PostgreSQL connection, a
//! worker a few descriptors per running attempt, and 1,000 worker sessions alone exceed the
//! usual soft limit of 1,024. [`raise_open_files_limit`] lifts the soft limit to the hard
//! one at start-up (what an unprivileged process may do), and logs the result at debug.

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit and returns the soft limit
/// in force afterwards (`None` when it cannot be read). A failure to raise it (a hard limit
/// of "unlimited" above the kernel's `fs.nr_open`, a sandbox that forbids it) leaves the
/// limit as it was: logged at debug, never an error.
pub fn raise_open_files_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct passed, which lives for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        tracing::debug!(
            error = %std::io::Error::last_os_error(),
            "failed to read the open-files limit (RLIMIT_NOFILE); left as it is"
        );
        return None;
    }
    let before = limit.rlim_cur;
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the struct passed, which lives for the call.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit.rlim_cur = limit.rlim_max;
        } else {
            tracing::debug!(
                error = %std::io::Error::last_os_error(),
                soft = before,
                hard = limit.rlim_max,
                "failed to raise the open-files limit (RLIMIT_NOFILE) to the hard limit; left as it is"
            );
        }
    }
    tracing::debug!(
        soft = limit.rlim_cur,
        hard = limit.rlim_max,
        before,
        "open-files limit (RLIMIT_NOFILE)"
    );
    Some(limit.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn current() -> libc::rlimit {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) }, 0);
        l
    }

    #[test]
    fn the_soft_open_files_limit_is_raised_to_the_hard_one() {
        let hard = current().rlim_max;
        // Lower the soft limit first (allowed to any process), so the raise has work to do.
        let low = libc::rlimit {
            rlim_cur: hard.min(256),
            rlim_max: hard,
        };
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) }, 0);
        let now = raise_open_files_limit().expect("the limit is readable");
        assert_eq!(now, current().rlim_cur);
        if hard != libc::RLIM_INFINITY {
            assert_eq!(now, hard, "the soft limit is the hard one");
        } else {
            // Unlimited is above fs.nr_open: the raise fails and the limit stays.
            assert!(now >= hard.min(256));
        }
    }
}
