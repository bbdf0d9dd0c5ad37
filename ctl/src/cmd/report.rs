//! `akbench run report RUN --html FILE` (or `--compare A B`): one self-contained HTML file
//! (inline CSS, JavaScript and SVG; a Content-Security-Policy that forbids every network
//! fetch), rendered by [`super::report_html`]. Runs are found as `run compare` finds them.
//! Exit 0 when written; 2 for bad input (as `run compare`) or an output path that is not a
//! regular file (a device, a FIFO: [`akbench_core::output`]), nothing written.

use crate::cli::{RemoteArgs, ReportArgs};
use crate::cmd::report_html;
use crate::cmd::shared::compare::{compute, Settings};
use crate::cmd::shared::source::{Finder, LoadedRun};
use crate::exit;
use akbench_core::evidence::EvidenceStore;
use akbench_core::report_view::{build, RunView, TrialAttempts};

/// Writes the report.
pub fn run(args: ReportArgs, remote: &RemoteArgs) -> anyhow::Result<i32> {
    let store = EvidenceStore::new(&args.store.store_root);
    let finder = Finder {
        store: &store,
        out: &args.out,
        remote,
    };
    // A device, FIFO or folder at the output is refused before any work.
    akbench_core::output::check(&args.html)?;
    let generated = chrono::Utc::now();
    let html = match (&args.compare, &args.run) {
        (Some(pair), _) => {
            let left = finder.load(&pair[0])?;
            let right = finder.load(&pair[1])?;
            let settings = Settings {
                left_agent: args.left_agent.clone(),
                right_agent: args.right_agent.clone(),
                allow_different: args.allow_different,
                seed: akbench_core::compare::stats::DEFAULT_SEED,
                resamples: akbench_core::compare::stats::DEFAULT_RESAMPLES,
            };
            let (checked, c) = compute(&left, &right, &settings)?;
            let (lv, rv) = (view(&left), view(&right));
            report_html::comparison(&left, &lv, &right, &rv, &checked, &c, generated)
        }
        (None, Some(run)) => {
            let r = finder.load(run)?;
            let v = view(&r);
            report_html::single(&r, &v, generated)
        }
        (None, None) => {
            return Err(crate::exit::InputError(
                "failed to write a report: no run given; fix: pass RUN or --compare LEFT RIGHT"
                    .into(),
            )
            .into())
        }
    };
    akbench_core::output::write(&args.html, html.as_bytes())?;
    if args.store.json {
        crate::cmd::shared::common::print_json(
            &serde_json::json!({"html": args.html, "bytes": html.len()}),
        )?;
    } else {
        outln!("wrote {} ({} bytes)", args.html.display(), html.len());
    }
    Ok(exit::OK)
}

/// The report view of a loaded run.
pub fn view(r: &LoadedRun) -> RunView {
    let records: Vec<TrialAttempts<'_>> = r
        .records
        .iter()
        .map(|rec| TrialAttempts {
            key: &rec.trial.key,
            attempts: &rec.attempts,
        })
        .collect();
    build(&r.trials, &records)
}
