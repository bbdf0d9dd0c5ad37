//! One claim for several workers (the coordinator's grouped report rounds,
//! `coordinator/src/scheduler/rounds.rs`): the claim takes as many items as the workers want
//! in all, and [`hand_out`] says which worker gets each. Items go to the workers in turn,
//! each up to what it wants, so every worker gets a mix of the runs the claim divided its
//! slots among; an item whose last attempt a worker lost goes to another ([`super::may_take`]
//! with another worker in the claim), and stays unclaimed when only that worker has room.

/// A worker's part of a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claimant<'a> {
    /// The worker.
    pub worker_id: &'a str,
    /// How many items it wants.
    pub wants: u64,
    /// Whether it must skip the items it lost (another worker may claim them).
    pub avoids_lost: bool,
}

/// For each item (in the order the claim chose them; each with the worker that lost its last
/// attempt, if any), the index of the claimant that gets it, or `None`.
pub fn hand_out(items: &[Option<&str>], claimants: &[Claimant<'_>]) -> Vec<Option<usize>> {
    let mut left: Vec<u64> = claimants.iter().map(|c| c.wants).collect();
    let mut next = 0;
    items
        .iter()
        .map(|lost_by| {
            let n = claimants.len();
            let k = (0..n).map(|step| (next + step) % n).find(|&k| {
                let c = &claimants[k];
                left[k] > 0 && super::may_take(*lost_by, c.worker_id, c.avoids_lost)
            })?;
            left[k] -= 1;
            next = k + 1;
            Some(k)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(worker_id: &str, wants: u64, avoids_lost: bool) -> Claimant<'_> {
        Claimant {
            worker_id,
            wants,
            avoids_lost,
        }
    }

    /// (case, items' lost_by, claimants, expected owners)
    #[allow(clippy::type_complexity)]
    const TABLE: &[(
        &str,
        &[Option<&str>],
        &[(&str, u64, bool)],
        &[Option<usize>],
    )] = &[
        ("no claimant", &[None], &[], &[None]),
        (
            "one claimant takes up to its wants",
            &[None, None, None],
            &[("a", 2, true)],
            &[Some(0), Some(0), None],
        ),
        (
            "in turn",
            &[None, None, None, None],
            &[("a", 2, true), ("b", 2, true)],
            &[Some(0), Some(1), Some(0), Some(1)],
        ),
        (
            "the one with room takes the rest",
            &[None, None, None],
            &[("a", 1, true), ("b", 2, true)],
            &[Some(0), Some(1), Some(1)],
        ),
        (
            "a lost item goes to another",
            &[Some("a"), None],
            &[("a", 1, true), ("b", 1, true)],
            &[Some(1), Some(0)],
        ),
        (
            "a lost item stays when only its loser has room",
            &[None, Some("a")],
            &[("b", 1, true), ("a", 1, true)],
            &[Some(0), None],
        ),
        (
            "a loser that need not avoid takes it",
            &[Some("a")],
            &[("a", 1, false)],
            &[Some(0)],
        ),
        (
            "lost by a worker not in the claim",
            &[Some("z")],
            &[("a", 1, true)],
            &[Some(0)],
        ),
        (
            "wanting nothing takes nothing",
            &[None, None],
            &[("a", 0, true), ("b", 1, true)],
            &[Some(1), None],
        ),
    ];

    #[test]
    fn hand_out_follows_the_table() {
        for (case, items, claimants, want) in TABLE {
            let claimants: Vec<Claimant> = claimants.iter().map(|&(w, n, a)| c(w, n, a)).collect();
            assert_eq!(hand_out(items, &claimants), want.to_vec(), "{case}");
        }
    }

    #[test]
    fn never_more_than_wanted_in_all() {
        let items = vec![None; 20];
        let claimants = [c("a", 3, true), c("b", 5, true), c("c", 0, true)];
        let got = hand_out(&items, &claimants);
        for (k, claimant) in claimants.iter().enumerate() {
            let n = got.iter().filter(|o| **o == Some(k)).count() as u64;
            assert_eq!(n, claimant.wants, "{}", claimant.worker_id);
        }
    }
}
