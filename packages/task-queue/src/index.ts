export { type BudgetWall, parseBudgetWall, publishBudgetWall } from "./budget-wall.js";
export { type Lane, type LaneOptions, startLane } from "./lane.js";
export { type TaskQueueNames, taskQueueNames, taskSubject } from "./names.js";
export {
  type Assignment,
  isVerificationAssignment,
  parseAssignment,
  publishTask,
  publishVerification,
  type TaskAssignment,
  type VerificationAssignment,
} from "./publish.js";
export { ACK_WAIT_MS, ensureTaskQueue, TaskQueueConfigError, type TaskQueueOptions } from "./stream.js";
export {
  ensureWebhookEventStream,
  publishWebhookEvent,
  WEBHOOK_DUPLICATE_WINDOW_MS,
  type WebhookEventNames,
  webhookEventNames,
  webhookEventSubject,
} from "./webhook-events.js";
