/**
 * Where task assignments travel. A prefix keeps deployments (and test files) on one NATS server apart.
 */
export interface TaskQueueNames {
  stream: string;
  subjectPrefix: string;
  consumer: string;
  /** Core NATS (not the stream): the coordinator tells every worker an account hit the wall. */
  budgetWallSubject: string;
}

export function taskQueueNames(prefix = "drover"): TaskQueueNames {
  if (!/^[a-zA-Z0-9_-]+$/.test(prefix)) {
    throw new Error(`task queue prefix "${prefix}" may only contain letters, digits, "_" and "-"`);
  }
  return {
    stream: `${prefix.toUpperCase().replace(/-/g, "_")}_TASKS`,
    subjectPrefix: `${prefix}.tasks`,
    consumer: `${prefix}-workers`,
    budgetWallSubject: `${prefix}.budget.wall`,
  };
}

export function taskSubject(names: TaskQueueNames, runId: string): string {
  return `${names.subjectPrefix}.${runId}`;
}
