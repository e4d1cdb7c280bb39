import {
  create,
  type DescMessage,
  type DescMethod,
  type DescService,
  fromBinary,
  toBinary,
} from "@bufbuild/protobuf";
import type { MethodDefinition, ServiceDefinition } from "@grpc/grpc-js";

/** The HTTP/2 path grpc uses for a method, e.g. `/drover.v1.RunService/GetRun`. */
export function methodPath(method: DescMethod): string {
  return `/${method.parent.typeName}/${method.name}`;
}

/** A grpc-js service definition keyed by each method's localName, with protobuf-es serializers. */
export function serviceDefinition(desc: DescService): ServiceDefinition {
  return buildDefinition(desc, (method) => decoder(method.input));
}

/**
 * The server's variant keeps requests as raw bytes: grpc-js answers a deserializer that throws with
 * INTERNAL, but a malformed body is the caller's fault, so the bridge decodes it and says
 * INVALID_ARGUMENT itself.
 */
export function rawRequestDefinition(desc: DescService): ServiceDefinition {
  return buildDefinition(desc, () => (bytes: Buffer) => bytes);
}

function buildDefinition(
  desc: DescService,
  requestDeserialize: (method: DescMethod) => (bytes: Buffer) => unknown,
): ServiceDefinition {
  const definition: Record<string, MethodDefinition<unknown, unknown>> = {};
  for (const method of desc.methods) {
    definition[method.localName] = {
      path: methodPath(method),
      requestStream: method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming",
      responseStream: method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming",
      requestSerialize: encoder(method.input),
      requestDeserialize: requestDeserialize(method),
      responseSerialize: encoder(method.output),
      responseDeserialize: decoder(method.output),
      originalName: method.name,
    };
  }
  return definition;
}

function encoder(schema: DescMessage) {
  // create() returns a message of this schema untouched, so init objects and messages both work.
  return (value: unknown): Buffer => {
    const bytes = toBinary(schema, create(schema, value as Record<string, unknown>));
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
}

function decoder(schema: DescMessage) {
  return (bytes: Buffer): unknown => fromBinary(schema, bytes);
}
