export * from "./budget-pacer.js";
export * from "./errors.js";
export * from "./provider.js";
export * from "./secret-text.js";
export * from "./sleep.js";
export * from "./source-adapter.js";
export * from "./source-client.js";
export * from "./verifier.js";
