//! A run's compact trial rows a page at a time, over a real coordinator on a fresh database
//! of a private PostgreSQL cluster: `ListTrialRows` over loopback gRPC with `after`/`limit`
//! (keyset on the trials' plan ordinals, migration 0027) and the viewer's run page of a run
//! too big to aggregate ([`Coordinated::aggregate_max`] set low), which reads one page per
//! request. Pages of every size, chained by the last row's ordinal, read every done trial
//! once: none lost, none repeated, across page boundaries and across trials that end
//! between two pages. With `ended_after_unix_ms`, only the trials that ended at or after it
//! (the same millisecond included), each with when it ended, in pages as well.

use std::collections::BTreeSet;
use std::sync::Arc;

use akbench_coordinator::evidence::{self, RunSummary};
use akbench_coordinator::pgcluster::test_support;
use akbench_coordinator::status::StatusOptions;
use akbench_coordinator::store::Store;
use akbench_coordinator::view_source::{SpecCache, StoreBackend};
use akbench_core::clock::SystemClock;
use akbench_core::plan::{plan, PlannedTrial};
use akbench_core::testkit::synthetic_spec;
use akbench_proto::control_client::ControlClient;
use akbench_proto::v1 as pb;
use akbench_viewer::pages::{self, RunQuery};
use akbench_viewer::source::{Coordinated, PageAt, Source};
use tonic::transport::Channel;

#[path = "common/done_trials.rs"]
mod done_trials;

/// Ends `trials` as the scheduler leaves them (even ordinals solved).
async fn finish(db: &tokio_postgres::Client, store: &Store, trials: &[&PlannedTrial]) {
    done_trials::end_trials(db, store, trials.iter().copied(), |t| t.ordinal % 2 == 0).await;
}

/// One `ListTrialRows` call: the rows' (ordinal, key).
async fn list(
    c: &mut ControlClient<Channel>,
    run: &str,
    after: Option<u64>,
    limit: u32,
) -> Vec<(u64, String)> {
    list_ended(c, run, after, limit, None)
        .await
        .into_iter()
        .map(|(o, k, _)| (o, k))
        .collect()
}

/// One `ListTrialRows` call of the trials that ended at or after `since` (milliseconds since
/// the epoch; `None`: every done trial): the rows' (ordinal, key, end).
async fn list_ended(
    c: &mut ControlClient<Channel>,
    run: &str,
    after: Option<u64>,
    limit: u32,
    since: Option<i64>,
) -> Vec<(u64, String, Option<i64>)> {
    let mut stream = c
        .list_trial_rows(pb::ListTrialRowsRequest {
            run: run.to_string(),
            after,
            limit,
            ended_after_unix_ms: since,
        })
        .await
        .unwrap()
        .into_inner();
    let mut out = Vec::new();
    while let Some(b) = stream.message().await.unwrap() {
        out.extend(
            b.rows
                .into_iter()
                .map(|r| (r.ordinal, r.key, r.ended_unix_ms)),
        );
    }
    out
}

/// Every page of `per` rows after `after`, chained by the last row's ordinal, concatenated;
/// each page is checked to hold at most `per` rows.
async fn walk(
    c: &mut ControlClient<Channel>,
    run: &str,
    mut after: Option<u64>,
    per: u32,
) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    loop {
        let page = list(c, run, after, per).await;
        assert!(
            page.len() <= per as usize,
            "a page of {per} held {}",
            page.len()
        );
        let Some(last) = page.last() else {
            return out;
        };
        after = Some(last.0);
        let full = page.len() == per as usize;
        out.extend(page);
        if !full {
            return out;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_trial_rows_lose_and_repeat_nothing() {
    let url = test_support::fresh_database().await;
    let (_handle, _stop, mut c) = done_trials::serve(&url).await;
    // 4 tasks x 2 agents x 2 repetitions: 16 trials, ordinals 0..16.
    let spec = synthetic_spec(4, 2, 2, &SystemClock);
    let ready = plan(&spec, &SystemClock).ready();
    let key = spec.identity.run_key.clone();
    assert_eq!(ready.trials.len(), 16);
    let (db, store) = done_trials::submit_with_items(&mut c, &url, &spec, &ready).await;
    // Nothing done: no rows, whatever the page.
    assert!(list(&mut c, &key, None, 0).await.is_empty());
    assert!(list(&mut c, &key, None, 3).await.is_empty());

    // Every trial but every third is done: gaps in the ordinals the pages step over.
    let by_ordinal = |o: u64| ready.trials.iter().find(|t| t.ordinal == o).unwrap();
    let first: Vec<&PlannedTrial> = (0..16).filter(|o| o % 3 != 0).map(by_ordinal).collect();
    finish(&db, &store, &first).await;
    let want: Vec<(u64, String)> = first.iter().map(|t| (t.ordinal, t.key.clone())).collect();
    let whole = list(&mut c, &key, None, 0).await;
    assert_eq!(whole, want, "every done trial once, in plan order");
    for per in [1, 2, 3, 4, 5, 10, 11, 100] {
        assert_eq!(walk(&mut c, &key, None, per).await, want, "pages of {per}");
    }
    // After the last ordinal, and after one beyond every ordinal: nothing.
    assert!(list(&mut c, &key, Some(15), 0).await.is_empty());
    assert!(list(&mut c, &key, Some(u64::MAX), 5).await.is_empty());
    // `after` is exclusive: from a done trial's ordinal, the next done one.
    assert_eq!(
        list(&mut c, &key, Some(4), 1).await,
        vec![(5, by_ordinal(5).key.clone())]
    );

    // Trials that end between two pages: one before the cursor (not on a later page: it is
    // behind the reader), two after it (on the later pages, once each).
    let page1 = list(&mut c, &key, None, 4).await;
    let cursor = page1.last().unwrap().0;
    assert_eq!(cursor, 5);
    finish(&db, &store, &[by_ordinal(3), by_ordinal(9), by_ordinal(15)]).await;
    let rest = walk(&mut c, &key, Some(cursor), 2).await;
    let mut read: Vec<(u64, String)> = page1.into_iter().chain(rest).collect();
    let unique: BTreeSet<u64> = read.iter().map(|r| r.0).collect();
    assert_eq!(unique.len(), read.len(), "a trial was read twice: {read:?}");
    let expected: BTreeSet<u64> = (0..16)
        .filter(|o| o % 3 != 0 || *o == 9 || *o == 15)
        .collect();
    assert_eq!(unique, expected, "{read:?}");
    // A new walk from the start has the trial that ended behind the cursor.
    read = walk(&mut c, &key, None, 3).await;
    let all: Vec<u64> = read.iter().map(|r| r.0).collect();
    let expected: Vec<u64> = (0..16).filter(|o| ![0, 6, 12].contains(o)).collect();
    assert_eq!(all, expected);
    let done = all.len() as u64;
    assert_eq!(done, 13);

    // The viewer's run page over the coordinator's database, the run above its aggregate
    // limit: one page of trials per request, chained by the next page's `after`.
    let specs = SpecCache::default();
    let mut source = Coordinated::new(StoreBackend {
        store: store.clone(),
        status: StatusOptions::default(),
        artifacts: None,
        specs: specs.clone(),
    });
    source.aggregate_max = done - 1;
    let mut at = PageAt {
        after: None,
        per: 5,
    };
    let mut seen = Vec::new();
    let mut pages_read = 0;
    loop {
        let p = source
            .run(&key, at)
            .await
            .unwrap()
            .expect("the run is known");
        let paged = p.paged.as_ref().expect("a run above the limit is paged");
        assert!(p.view.trials.is_empty(), "a paged run is not aggregated");
        assert_eq!(p.progress.done, done);
        assert!(paged.trials.len() <= 5);
        seen.extend(paged.trials.iter().map(|t| t.key.clone()));
        pages_read += 1;
        let html = pages::run(
            &p,
            &RunQuery {
                after: at.after,
                per: Some(5),
                ..RunQuery::default()
            },
        );
        assert!(html.contains("id=\"paged\""), "{html}");
        match paged.next {
            Some(next) => {
                assert!(
                    html.contains(&format!("?after={next}&amp;per=5#trials")),
                    "{html}"
                );
                at.after = Some(next);
            }
            None => {
                assert!(!html.contains("class=\"next\""), "{html}");
                break;
            }
        }
    }
    let keys: Vec<String> = read.into_iter().map(|r| r.1).collect();
    assert_eq!(
        seen, keys,
        "the run page's pages read every done trial once"
    );
    assert_eq!(pages_read, 3, "13 trials on pages of 5");
    // At the limit the run page aggregates the whole run, as before.
    source.aggregate_max = done;
    let p = source.run(&key, PageAt::default()).await.unwrap().unwrap();
    assert!(p.paged.is_none());
    assert_eq!(p.view.trials.len() as u64, done);

    // Trial pages: the run's spec is read and verified once, then taken from the cache.
    let run = evidence::find_run(&store, &key).await.unwrap();
    assert!(specs.get(&run).is_none(), "no record read yet");
    let first = source.trial(&keys[0]).await.unwrap().expect("a done trial");
    assert_eq!(first.record.trial.key, keys[0]);
    let kept = specs.get(&run).expect("the spec is kept");
    let second = source.trial(&keys[1]).await.unwrap().expect("a done trial");
    assert_eq!(second.record.trial.key, keys[1]);
    assert!(
        Arc::ptr_eq(&kept, &specs.get(&run).unwrap()),
        "the second page read the kept spec"
    );
    // A run whose spec digest differs (another spec) is not served the kept one.
    let other = RunSummary {
        spec_digest: "another".into(),
        ..run.clone()
    };
    assert!(specs.get(&other).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_ended_since_a_bound_are_those_at_or_after_it_with_their_end() {
    let url = test_support::fresh_database().await;
    let (_handle, _stop, mut c) = done_trials::serve(&url).await;
    let spec = synthetic_spec(4, 2, 2, &SystemClock);
    let ready = plan(&spec, &SystemClock).ready();
    let key = spec.identity.run_key.clone();
    let (db, store) = done_trials::submit_with_items(&mut c, &url, &spec, &ready).await;
    let by_ordinal = |o: u64| ready.trials.iter().find(|t| t.ordinal == o).unwrap();
    let group = |from: u64| (from..from + 4).map(by_ordinal).collect::<Vec<_>>();
    // Four groups of four trials ending at t0 ms, t0 + 1000 ms exactly, 900 µs later (the
    // same millisecond) and t0 + 2000 ms.
    let t0: i64 = 1_780_000_000_000;
    for (from, micros) in [
        (0, t0 * 1000),
        (4, (t0 + 1000) * 1000),
        (8, (t0 + 1000) * 1000 + 900),
        (12, (t0 + 2000) * 1000),
    ] {
        finish(&db, &store, &group(from)).await;
        done_trials::stamp_ended(&db, &group(from), micros).await;
    }
    let end_of = |o: u64| match o {
        0..=3 => t0,
        4..=11 => t0 + 1000,
        _ => t0 + 2000,
    };
    let rows = |ordinals: std::ops::Range<u64>| -> Vec<(u64, String, Option<i64>)> {
        ordinals
            .map(|o| (o, by_ordinal(o).key.clone(), Some(end_of(o))))
            .collect()
    };
    // Unset: every done trial, each with when it ended (rounded down to the millisecond).
    assert_eq!(list_ended(&mut c, &key, None, 0, None).await, rows(0..16));
    // At a trial's own millisecond: it and every later one; a bound is inclusive.
    assert_eq!(
        list_ended(&mut c, &key, None, 0, Some(t0 + 1000)).await,
        rows(4..16)
    );
    assert_eq!(
        list_ended(&mut c, &key, None, 0, Some(t0)).await,
        rows(0..16)
    );
    // A millisecond later: the trials stamped within t0 + 1000 ms are behind it.
    assert_eq!(
        list_ended(&mut c, &key, None, 0, Some(t0 + 1001)).await,
        rows(12..16)
    );
    assert!(list_ended(&mut c, &key, None, 0, Some(t0 + 2001))
        .await
        .is_empty());
    // Pages of the bounded rows, chained by ordinal: each once.
    let mut read = Vec::new();
    let mut after = None;
    loop {
        let page = list_ended(&mut c, &key, after, 3, Some(t0 + 1000)).await;
        assert!(page.len() <= 3);
        after = page.last().map(|r| r.0);
        let full = page.len() == 3;
        read.extend(page);
        if !full {
            break;
        }
    }
    assert_eq!(read, rows(4..16), "pages of 3 from t0 + 1000 ms");
    // A trial that ends later is in the next poll from the latest end seen.
    let late = [by_ordinal(0)];
    done_trials::stamp_ended(&db, &late, (t0 + 2000) * 1000 + 1).await;
    assert_eq!(
        list_ended(&mut c, &key, None, 0, Some(t0 + 2000)).await,
        [(0, late[0].key.clone(), Some(t0 + 2000))]
            .into_iter()
            .chain(rows(12..16))
            .collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_bound_out_of_range_is_refused_naming_the_field() {
    let url = test_support::fresh_database().await;
    let (_handle, _stop, mut c) = done_trials::serve(&url).await;
    let spec = synthetic_spec(1, 1, 1, &SystemClock);
    let ready = plan(&spec, &SystemClock).ready();
    let key = spec.identity.run_key.clone();
    let _ = done_trials::submit_with_items(&mut c, &url, &spec, &ready).await;
    for bound in [
        i64::MAX,
        i64::MIN,
        9_000_000_000_000_000,
        -1_000_000_000_000_000,
    ] {
        let status = c
            .list_trial_rows(pb::ListTrialRowsRequest {
                run: key.clone(),
                ended_after_unix_ms: Some(bound),
                ..Default::default()
            })
            .await
            .expect_err("refused");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        assert!(
            status.message().contains("ended_after_unix_ms"),
            "{status:?}"
        );
    }
}
