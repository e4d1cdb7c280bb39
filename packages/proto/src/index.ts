// The drover.v1 contract and the standard health protocol, as protobuf-es v2 schemas.

export type { DescMessage, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
// The protobuf-es helpers services need, so they share this package's runtime instead of their own.
export {
  create,
  fromBinary,
  fromJson,
  fromJsonString,
  isMessage,
  toBinary,
  toJson,
  toJsonString,
} from "@bufbuild/protobuf";
export { timestampDate, timestampFromDate, timestampNow } from "@bufbuild/protobuf/wkt";
export {
  type BudgetReport,
  type BudgetReportAccount,
  budgetReportRequest,
  type DailyAllowance,
  readBudgetReport,
} from "./budget-report.js";
export * from "./gen/drover/v1/run_pb.js";
export * from "./gen/drover/v1/run_service_pb.js";
export * from "./gen/drover/v1/worker_service_pb.js";
export * from "./gen/grpc/health/v1/health_pb.js";
// The gRPC bridge.
export {
  type AddServiceOptions,
  type AnyService,
  addService,
  callerStatus,
  type Interceptor,
  type MethodHandler,
  type ServerStreamingHandler,
  type ServiceImplementation,
  type UnaryHandler,
} from "./grpc/add-service.js";
export type { CallContext } from "./grpc/call-context.js";
export {
  type CallOptions,
  type Client,
  type ClientOptions,
  createClient,
  type ServerStreamingMethod,
  type UnaryMethod,
} from "./grpc/create-client.js";
export { createHealthService, type HealthService, type HealthStatus } from "./grpc/health.js";
export { Code, isRpcError, RpcError } from "./grpc/rpc-error.js";
export { methodPath, serviceDefinition } from "./grpc/service-definition.js";
export { type RunningServer, type StartServerOptions, startServer } from "./grpc/start-server.js";
export { runFacts } from "./run-facts.js";
export {
  fromProtoRunStatus,
  LIVE_RUN_STATUSES,
  RUN_STATUSES,
  runStatusFromName,
  runStatusName,
  toProtoRunStatus,
} from "./run-status.js";
