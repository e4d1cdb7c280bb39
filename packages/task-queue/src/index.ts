export { type Lane, type LaneOptions, startLane } from "./lane.js";
export { type TaskQueueNames, taskQueueNames, taskSubject } from "./names.js";
export { parseAssignment, publishTask, type TaskAssignment } from "./publish.js";
export { ACK_WAIT_MS, ensureTaskQueue } from "./stream.js";
