export * from "./deadline.js";
export * from "./field-layout.js";
export * from "./gen/google/rpc/error_details_pb.js";
// gRPC's own services (health, reflection v1 and v1alpha) share message names between versions: each is a namespace.
export * as grpcHealthV1 from "./gen/grpc/health/v1/health_pb.js";
export * as grpcReflectionV1 from "./gen/grpc/reflection/v1/reflection_pb.js";
export * as grpcReflectionV1alpha from "./gen/grpc/reflection/v1alpha/reflection_pb.js";
export * from "./gen/lf/a2a/v1/a2a_pb.js";
export * from "./gen/parley/v1/access_pb.js";
export * from "./gen/parley/v1/session_pb.js";
export * from "./gen/parley/v1/target_pb.js";
export * from "./gen/parley/v1/thread_pb.js";
export * from "./wire.js";
