//! The remote forms of the `run` commands. Each connects once, makes its calls and prints
//! the same shapes as the local command (inspect, diff, reconcile) or its own (submit,
//! start, resume, cancel, status, records; see docs/remote.md).

use super::view::{self, summary_json};
use super::{block_on, is_over, state_name, submit, Client, Remote};
use crate::cli::{
    CancelArgs, Command, DiffArgs, InspectArgs, PlanArgs, ReconcileArgs, RemoteArgs, RemoteRunArgs,
    ResumeArgs, ResumeRouteArgs, RunCommand, StatusArgs,
};
use crate::cmd::shared::{self, common::print_json};
use crate::exit::{self, InputError};
use akbench_core::accounting::{load_lines, ObservedLine};
use akbench_core::evidence::EvidenceStore;
use akbench_core::plan::RunPlan;
use akbench_core::spec::ResolvedRunSpec;
use akbench_core::spec_diff::{Change, ChangeKind, SpecDiff};
use akbench_proto::v1 as pb;
use std::io::IsTerminal;

/// What [`dispatch`] did with a command.
#[derive(Debug)]
pub enum Dispatch {
    /// Remote mode ran it.
    Done(anyhow::Result<i32>),
    /// Not remote mode, or a command that always runs locally: run it locally.
    Local(Command),
}

/// Runs `command` against the coordinator when `--coordinator` is given and the command has
/// a remote form; otherwise hands it back.
pub fn dispatch(args: &RemoteArgs, command: Command) -> Dispatch {
    let Some(url) = args.coordinator.as_deref().filter(|u| !u.trim().is_empty()) else {
        return Dispatch::Local(command);
    };
    let Command::Run(rc) = command else {
        return Dispatch::Local(command);
    };
    if !is_remote(&rc) {
        return Dispatch::Local(Command::Run(rc));
    }
    Dispatch::Done(Remote::new(url, args).and_then(|remote| run(&remote, rc)))
}

/// The error of a remote-only command run without a coordinator (exit 2).
pub fn needs_coordinator(rc: &RunCommand) -> anyhow::Error {
    InputError(format!(
        "failed to run `akbench run {}`: it talks to a coordinator; fix: pass --coordinator URL \
         or set AKBENCH_COORDINATOR",
        name(rc)
    ))
    .into()
}

/// Where a `run` subcommand runs when `--coordinator` is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// In this process; `--coordinator` is not used for it by the dispatcher (`compare`,
    /// `list` and `report` read from a coordinator themselves when given one).
    Local,
    /// Here without `--coordinator`, against the coordinator with it (plan, inspect, diff,
    /// reconcile).
    Either,
    /// Only against a coordinator: without one it is refused (exit 2).
    Remote,
}

/// Every `run` subcommand's name and [`Reach`]: the one table (exhaustive, so a new
/// subcommand must say where it runs). The dispatcher ([`super::dispatch`]), the local
/// commands (`cmd::run`) and messages read it.
pub fn describe(rc: &RunCommand) -> (&'static str, Reach) {
    use Reach::*;
    match rc {
        RunCommand::Single(_) => ("single", Local),
        RunCommand::Execute(_) => ("execute", Local),
        RunCommand::Evaluate(_) => ("evaluate", Local),
        RunCommand::Aggregate(_) => ("aggregate", Local),
        RunCommand::Plan(_) => ("plan", Either),
        RunCommand::Inspect(_) => ("inspect", Either),
        RunCommand::Diff(_) => ("diff", Either),
        RunCommand::Reconcile(_) => ("reconcile", Either),
        RunCommand::Submit(_) => ("submit", Remote),
        RunCommand::Start(_) => ("start", Remote),
        RunCommand::Resume(_) => ("resume", Remote),
        RunCommand::Grade(_) => ("grade", Remote),
        RunCommand::Cancel(_) => ("cancel", Remote),
        RunCommand::ResumeRoute(_) => ("resume-route", Remote),
        RunCommand::Status(_) => ("status", Remote),
        RunCommand::Records(_) => ("records", Remote),
        RunCommand::Compare(_) => ("compare", Local),
        RunCommand::List(_) => ("list", Local),
        RunCommand::ExportHarbor(_) => ("export-harbor", Local),
        RunCommand::ImportHarbor(_) => ("import-harbor", Local),
        RunCommand::Report(_) => ("report", Local),
        RunCommand::Trajectory(_) => ("trajectory", Local),
    }
}

/// True for the `run` commands that have a remote form.
pub fn is_remote(rc: &RunCommand) -> bool {
    describe(rc).1 != Reach::Local
}

/// The subcommand's name, for messages.
pub fn name(rc: &RunCommand) -> &'static str {
    describe(rc).0
}

/// Runs a remote command.
pub fn run(remote: &Remote, rc: RunCommand) -> anyhow::Result<i32> {
    // Local work (resolving the manifest, reading the store or the observations file) comes
    // first: bad input fails with exit 2 before anything is sent.
    match rc {
        RunCommand::Plan(args) => {
            let (spec, ready, dir, checks) = shared::planning::plan_and_store(&args)?;
            if !args.store.json {
                eprintln!(
                    "akbench: task checks: {}",
                    shared::task_checks::checks_line(&checks)
                );
            }
            let store = EvidenceStore::new(&args.store.store_root);
            with_client(remote, |c| async move {
                let out = submit::Outgoing {
                    spec: &spec,
                    ready: &ready,
                    store: &store,
                    dir: &dir,
                };
                submit::submit(&c, out, &args).await
            })
        }
        RunCommand::Submit(args) => {
            let store = EvidenceStore::new(&args.store.store_root);
            let r = shared::common::find_head(&store, &args.run)?;
            let Some(ready) = r.ready.clone() else {
                return Err(InputError(format!(
                    "failed to submit run {}: it has no ready plan; fix: plan it with \
                     `akbench run plan`",
                    r.spec.run_key()
                ))
                .into());
            };
            // One pass over the plan file: the trials are hashed as they are sent, and a
            // damaged plan ends the stream early (the coordinator, which checks the digest
            // too, stores nothing of it).
            let plan_args = PlanArgs {
                config: Default::default(),
                tasks_root: None,
                agents_root: None,
                check_tasks: false,
                cache: None,
                store: args.store,
            };
            with_client(remote, |c| async move {
                let out = submit::Outgoing {
                    spec: &r.spec,
                    ready: &ready,
                    store: &store,
                    dir: &r.dir,
                };
                submit::submit(&c, out, &plan_args).await
            })
        }
        RunCommand::Inspect(args) => with_client(remote, |c| inspect(c, args)),
        RunCommand::Diff(args) => with_client(remote, |c| diff(c, args)),
        RunCommand::Reconcile(args) => {
            let lines = match &args.observations {
                Some(path) => Some(load_lines(path)?),
                None => None,
            };
            with_client(remote, |c| reconcile(c, args, lines))
        }
        RunCommand::Start(args) => with_client(remote, |c| start(c, args)),
        RunCommand::Resume(args) => with_client(remote, |c| resume(c, args)),
        RunCommand::Grade(run) => {
            with_client(remote, |c| resume(c, ResumeArgs { run, grade: true }))
        }
        RunCommand::Cancel(args) => with_client(remote, |c| cancel(c, args)),
        RunCommand::ResumeRoute(args) => with_client(remote, |c| resume_route(c, args)),
        RunCommand::Status(args) => with_client(remote, |c| status(remote, c, args)),
        RunCommand::Records(args) => with_client(remote, |c| super::records::run(c, args)),
        other => Err(InputError(format!(
            "`akbench run {}` runs locally only; drop --coordinator",
            name(&other)
        ))
        .into()),
    }
}

fn with_client<F, Fut>(remote: &Remote, f: F) -> anyhow::Result<i32>
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<i32>>,
{
    block_on(async move {
        let client = remote.connect().await?;
        f(client).await
    })?
}

async fn inspect(c: Client, args: InspectArgs) -> anyhow::Result<i32> {
    let r = c.get_run(&args.run, true).await?;
    let summary = r.run.unwrap_or_default();
    let spec: ResolvedRunSpec = serde_json::from_str(&r.spec_json).map_err(|e| {
        anyhow::anyhow!(
            "failed to read the spec of run {} from {}: {e}",
            summary.run_key,
            c.url()
        )
    })?;
    let plan: Option<RunPlan> = if r.plan_json.is_empty() {
        None
    } else {
        Some(serde_json::from_str(&r.plan_json).map_err(|e| {
            anyhow::anyhow!(
                "failed to read the plan of run {} from {}: {e}",
                summary.run_key,
                c.url()
            )
        })?)
    };
    shared::show::run(
        &spec,
        plan.as_ref(),
        &state_name(summary.state),
        None,
        args.store.json,
    )
}

async fn diff(c: Client, args: DiffArgs) -> anyhow::Result<i32> {
    let r = c
        .inner
        .clone()
        .diff_runs(c.request(pb::DiffRunsRequest {
            left: args.left,
            right: args.right,
        }))
        .await
        .map_err(|s| c.error(s))?
        .into_inner();
    let value = |j: &str| -> anyhow::Result<Option<serde_json::Value>> {
        if j.is_empty() {
            Ok(None)
        } else {
            Ok(Some(serde_json::from_str(j)?))
        }
    };
    let mut changes = Vec::with_capacity(r.changes.len());
    for ch in &r.changes {
        let kind = match pb::ChangeKind::try_from(ch.kind) {
            Ok(pb::ChangeKind::Added) => ChangeKind::Added,
            Ok(pb::ChangeKind::Removed) => ChangeKind::Removed,
            _ => ChangeKind::Changed,
        };
        changes.push(Change {
            path: if ch.path.is_empty() {
                ch.section.clone()
            } else {
                format!("{}.{}", ch.section, ch.path)
            },
            kind,
            left: value(&ch.left_json)?,
            right: value(&ch.right_json)?,
        });
    }
    let (l, rt) = (r.left.unwrap_or_default(), r.right.unwrap_or_default());
    shared::show::diff(
        (l.run_key, l.run_id),
        (rt.run_key, rt.run_id),
        &SpecDiff { changes },
        args.store.json,
    )
}

/// Reconciles on the coordinator (streamed: [`super::reconcile`]).
async fn reconcile(
    c: Client,
    args: ReconcileArgs,
    lines: Option<Vec<ObservedLine>>,
) -> anyhow::Result<i32> {
    super::reconcile::reconcile(&c, &args.run, lines, args.all, args.store.json).await
}

fn print_action(
    args: &RemoteRunArgs,
    run: Option<&pb::RunSummary>,
    field: &str,
    n: u64,
    line: String,
) -> anyhow::Result<i32> {
    if args.json {
        print_json(&serde_json::json!({ "run": summary_json(run), field: n }))?;
    } else {
        outln!("{line}");
    }
    Ok(exit::OK)
}

async fn start(c: Client, args: RemoteRunArgs) -> anyhow::Result<i32> {
    let r = c
        .inner
        .clone()
        .start_run(c.request(pb::StartRunRequest {
            run: args.run.clone(),
        }))
        .await
        .map_err(|s| c.error(s))?
        .into_inner();
    let run = r.run.as_ref();
    let key = run.map(|s| s.run_key.as_str()).unwrap_or(&args.run);
    let line = if r.work_items_created == 0 {
        format!("run {key} was already started (nothing created)")
    } else {
        format!("started run {key}: {} trials queued", r.work_items_created)
    };
    print_action(&args, run, "work_items_created", r.work_items_created, line)
}

async fn resume(c: Client, args: ResumeArgs) -> anyhow::Result<i32> {
    let r = c
        .inner
        .clone()
        .resume_run(c.request(pb::ResumeRunRequest {
            run: args.run.run.clone(),
            grade: args.grade,
        }))
        .await
        .map_err(|s| c.error(s))?
        .into_inner();
    let run = r.run.as_ref();
    let key = run.map(|s| s.run_key.as_str()).unwrap_or(&args.run.run);
    if args.run.json {
        print_json(&serde_json::json!({
            "run": summary_json(run),
            "requeued": r.requeued,
            "grading": args.grade.then_some(r.grading),
            "not_gradable": args.grade.then_some(r.not_gradable),
        }))?;
        return Ok(exit::OK);
    }
    let mut line = format!("resumed run {key}: {} trials re-queued", r.requeued);
    if args.grade {
        line.push_str(&format!(
            "; {} executed, not graded trials queued for grading (their agents do not run again)",
            r.grading
        ));
        if r.not_gradable > 0 {
            line.push_str(&format!(
                "; {} could not be queued (unusable stored work item or record: see the coordinator's log) and stay not_graded",
                r.not_gradable
            ));
        }
    }
    outln!("{line}");
    Ok(exit::OK)
}

async fn cancel(c: Client, args: CancelArgs) -> anyhow::Result<i32> {
    let r = c
        .inner
        .clone()
        .cancel_run(c.request(pb::CancelRunRequest {
            run: args.run.run.clone(),
            reason: args.reason.clone(),
        }))
        .await
        .map_err(|s| c.error(s))?
        .into_inner();
    let run = r.run.as_ref();
    let key = run.map(|s| s.run_key.as_str()).unwrap_or(&args.run.run);
    let line = if r.unchanged.is_empty() {
        format!(
            "cancelling run {key}: {} live attempts asked to stop (reason: {})",
            r.attempts_cancelling, args.reason
        )
    } else {
        format!("run {key} not cancelled: {}; nothing changed", r.unchanged)
    };
    if args.run.json {
        let unchanged = (!r.unchanged.is_empty()).then_some(r.unchanged.as_str());
        print_json(&serde_json::json!({
            "run": summary_json(run),
            "attempts_cancelling": r.attempts_cancelling,
            "unchanged": unchanged,
        }))?;
        return Ok(exit::OK);
    }
    outln!("{line}");
    Ok(exit::OK)
}

async fn resume_route(c: Client, args: ResumeRouteArgs) -> anyhow::Result<i32> {
    let r = c
        .inner
        .clone()
        .resume_route(c.request(pb::ResumeRouteRequest {
            route: args.route.clone(),
        }))
        .await
        .map_err(|s| c.error(s))?
        .into_inner();
    if args.json {
        let until = (r.paused_until_unix_ms > 0).then_some(r.paused_until_unix_ms);
        let last = (!r.last_error.is_empty()).then_some(r.last_error.as_str());
        print_json(&serde_json::json!({
            "route": args.route,
            "was_paused": r.was_paused,
            "paused_until_unix_ms": until,
            "last_error": last,
        }))?;
    } else if r.was_paused {
        outln!(
            "provider route {}: pause lifted (last error: {})",
            args.route,
            if r.last_error.is_empty() {
                "none"
            } else {
                &r.last_error
            }
        );
    } else {
        outln!(
            "provider route {} was not paused; its failure count starts again",
            args.route
        );
    }
    Ok(exit::OK)
}

/// Failed reconnects in a row after which `run status --watch` gives up (about a minute).
const WATCH_RECONNECTS: u32 = 12;

/// Whether a watch that ended with `s` may reconnect: the coordinator went away or
/// restarted, not a refusal.
fn watch_retryable(s: &tonic::Status) -> bool {
    matches!(
        s.code(),
        tonic::Code::Unavailable
            | tonic::Code::Unknown
            | tonic::Code::Cancelled
            | tonic::Code::Aborted
    )
}

async fn status(remote: &Remote, mut c: Client, args: StatusArgs) -> anyhow::Result<i32> {
    if !args.watch {
        let s = c
            .inner
            .clone()
            .get_status(c.request(pb::GetStatusRequest {
                run: args.run.run.clone(),
            }))
            .await
            .map_err(|s| c.error(s))?
            .into_inner();
        if args.run.json {
            print_json(&view::status_json(&s))?;
        } else {
            out!("{}", view::block(&s));
        }
        return Ok(exit::OK);
    }
    let tty = std::io::stdout().is_terminal() && !args.run.json;
    let mut watch = super::watch::Watch::new(args.run.json, tty);
    let mut last: Option<pb::RunStatus> = None;
    // A coordinator restart (or a dropped connection) ends the stream early: reconnect with
    // backoff until the run is over, giving up after WATCH_RECONNECTS failed tries in a row.
    // With replicas (`--coordinator A,B`), each reconnect goes to the next one that answers
    // (`Remote::reconnect_after`), so a replica's death does not end the watch.
    let mut failures = 0u32;
    loop {
        let opened = c
            .inner
            .clone()
            .watch_status(c.request(pb::WatchStatusRequest {
                run: args.run.run.clone(),
                min_interval_ms: 0,
            }))
            .await;
        let ended_by = match opened {
            Ok(stream) => {
                let mut stream = stream.into_inner();
                loop {
                    match stream.message().await {
                        Ok(Some(s)) => {
                            failures = 0;
                            watch.show(&s)?;
                            last = Some(s);
                        }
                        Ok(None) => break None,
                        Err(status) => break Some(status),
                    }
                }
            }
            Err(status) => Some(status),
        };
        let over = last
            .as_ref()
            .and_then(|s| s.run.as_ref())
            .is_some_and(|r| is_over(r.state));
        if over {
            break;
        }
        let status = ended_by.unwrap_or_else(|| {
            tonic::Status::unavailable("the status stream ended before the run did")
        });
        // Only a watch that was following the run reconnects: a coordinator that is not
        // there at all is reported at once (exit 3).
        if last.is_none() || !watch_retryable(&status) || failures >= WATCH_RECONNECTS {
            return Err(super::from_status(&status, c.url(), false));
        }
        failures += 1;
        let wait = std::time::Duration::from_millis(250u64 << failures.min(5));
        watch.note(&format!(
            "lost the status stream from {} ({}); reconnecting in {:.1} s",
            c.url(),
            status.message(),
            wait.as_secs_f64()
        ));
        tokio::time::sleep(wait).await;
        if !remote.fallbacks.is_empty() {
            match remote.reconnect_after(c.url()).await {
                Ok(next) => {
                    if next.url() != c.url() {
                        watch.note(&format!("following the run through {}", next.url()));
                    }
                    c = next;
                }
                // None answers now: the next try goes through the same client again.
                Err(e) => tracing::warn!("{e:#}"),
            }
        }
    }
    watch.finish();
    let Some(last) = last else {
        anyhow::bail!("the coordinator at {} sent no status", c.url());
    };
    let summary = last.run.clone().unwrap_or_default();
    if !is_over(summary.state) {
        return Err(super::from_status(
            &tonic::Status::unavailable("the status stream ended before the run did"),
            c.url(),
            false,
        ));
    }
    // The run is over: exit 0 when its accounting is valid.
    let a =
        super::reconcile::call(&c, &summary.run_id, None, pb::TrialList::None, 0, &mut ()).await?;
    eprintln!(
        "run {} {}: accounting {} ({})",
        summary.run_key,
        state_name(summary.state),
        if a.valid { "valid" } else { "INVALID" },
        a.rates
    );
    Ok(if a.valid { exit::OK } else { exit::NEGATIVE })
}
