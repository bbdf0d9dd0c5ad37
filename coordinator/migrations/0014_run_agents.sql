-- 0014_run_agents: StartRun stores each agent condition of a run once, not one WorkItem
-- document per work item (issue 12).
--
-- Until now StartRun built, in the coordinator, the canonical JSON of core's `WorkItem`
-- ({trial, agent}) of every planned trial and stored it in `work_items.document`: about
-- 13 KiB of coordinator memory and one large jsonb row per trial (100,000 trials: 18 s and
-- 1.3 GiB). The trial part is the trial's `planned_trials.document` and the agent part is the
-- same for every trial of an agent. StartRun now stores the run's agent conditions here,
-- once, and creates its execute work items in SQL from `planned_trials` with `document`
-- NULL; readers of such an item's document (the claim, grading) compose
-- {"trial": planned_trials.document, "agent": run_agents.document}: the same jsonb the old
-- path stored. Grade work keeps its own `work_items.document`.
CREATE TABLE run_agents (
    run_id    uuid  NOT NULL REFERENCES runs (run_id),
    -- The agent condition's label (`work_items.agent`, `planned_trials.agent`).
    agent     text  NOT NULL,
    -- core's `SpecAgent` as serde serializes it: the `agent` of the worker's `WorkItem`.
    document  jsonb NOT NULL,
    PRIMARY KEY (run_id, agent)
);

CREATE TRIGGER run_agents_append_only BEFORE UPDATE OR DELETE ON run_agents
    FOR EACH ROW EXECUTE FUNCTION akbench_refuse_mutation();
CREATE TRIGGER run_agents_no_truncate BEFORE TRUNCATE ON run_agents
    FOR EACH STATEMENT EXECUTE FUNCTION akbench_refuse_mutation();
