export { loadReceiverConfig, type ReceiverConfig } from "./config.js";
export { deliveryProblem, type ReceiverDeps, type WebhookDelivery, WebhookReceiver } from "./receiver.js";
export { type RunningReceiver, startReceiver } from "./service.js";
