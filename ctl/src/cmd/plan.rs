//! `akbench run plan`: manifest -> spec -> draft plan -> ready plan, stored in that order.
//! Bad input (manifest, task, agent) exits 2 before anything is written.

use crate::cli::PlanArgs;
use crate::cmd::{counts, print_json};
use akbench_core::clock::SystemClock;
use akbench_core::evidence::EvidenceStore;
use akbench_core::manifest::ExperimentManifest;
use akbench_core::plan::plan;
use akbench_core::spec::{resolve, ResolveInputs};

/// Plans a run.
pub fn run(args: PlanArgs) -> anyhow::Result<i32> {
    let clock = SystemClock;
    let manifest = ExperimentManifest::load(&args.config)?;
    let inputs = ResolveInputs {
        manifest_path: Some(args.config.clone()),
        tasks_root: args.tasks_root.clone(),
        agents_root: args.agents_root.clone(),
    };
    let spec = resolve(&manifest, &inputs, &clock)?;
    let store = EvidenceStore::new(&args.store.store_root);
    let spec = store.create_run(spec)?;
    let draft = plan(&spec, &clock);
    store.put_plan(&draft)?;
    let ready = draft.ready();
    store.put_plan(&ready)?;
    let dir = args.store.store_root.join(spec.run_key());
    if args.store.json {
        print_json(&serde_json::json!({
            "run_key": spec.run_key(),
            "run_id": spec.run_id(),
            "dir": dir,
            "spec_digest": spec.digest,
            "condition_digest": spec.condition_digest,
            "plan_digest": ready.digest,
            "state": "ready",
            "summary": ready.summary,
        }))?;
    } else {
        let s = &ready.summary;
        println!("run      {}", spec.run_key());
        println!("uuid     {}", spec.run_id());
        println!("stored   {}", dir.display());
        println!(
            "trials   {} = {} tasks x {} agents x {} repetitions",
            s.trials,
            s.by_task.len(),
            s.by_agent.len(),
            spec.condition.repetitions
        );
        println!("agents   {}", counts(&s.by_agent));
        println!("families {}", counts(&s.by_family));
        println!("backend  {}", counts(&s.by_backend));
        println!("visible  {}", counts(&s.by_visibility));
        println!("state    ready ({})", counts(&s.by_lifecycle));
    }
    Ok(crate::exit::OK)
}
