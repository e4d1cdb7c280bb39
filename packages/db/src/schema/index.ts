export * from "./engine.js";
export * from "./product.js";
