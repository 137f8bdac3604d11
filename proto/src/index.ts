export * from "./gen/google/rpc/error_details_pb.js";
export * from "./gen/lf/a2a/v1/a2a_pb.js";
export * from "./gen/parley/v1/session_pb.js";
export * from "./gen/parley/v1/target_pb.js";
export * from "./gen/parley/v1/thread_pb.js";
export * from "./wire.js";
