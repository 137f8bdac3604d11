import { type DescFile, type DescMessage, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, type ServiceImpl } from "@connectrpc/connect";
import type { grpcReflectionV1, grpcReflectionV1alpha } from "@parley/proto";

type Request = grpcReflectionV1.ServerReflectionRequest | grpcReflectionV1alpha.ServerReflectionRequest;

/**
 * The files reflection can describe, and the symbols they declare. Built once
 * from the generated file descriptors (protobuf-es embeds each file's
 * FileDescriptorProto), so answers are the serialized descriptors themselves.
 */
interface Catalog {
  readonly services: readonly string[];
  readonly files: ReadonlyMap<string, DescFile>;
  readonly symbols: ReadonlyMap<string, DescFile>;
  /** "<extendee>#<number>" -> file, for file_containing_extension. */
  readonly extensions: ReadonlyMap<string, DescFile>;
  readonly extensionNumbers: ReadonlyMap<string, number[]>;
  /** Serialized FileDescriptorProto of each file. */
  readonly bytes: ReadonlyMap<string, Uint8Array>;
}

function buildCatalog(roots: readonly DescFile[], services: readonly string[]): Catalog {
  const files = new Map<string, DescFile>();
  const symbols = new Map<string, DescFile>();
  const extensions = new Map<string, DescFile>();
  const extensionNumbers = new Map<string, number[]>();
  const addMessage = (file: DescFile, message: DescMessage) => {
    symbols.set(message.typeName, file);
    for (const nested of message.nestedMessages) addMessage(file, nested);
    for (const e of message.nestedEnums) symbols.set(e.typeName, file);
    for (const x of message.nestedExtensions) addExtension(file, x.typeName, x.extendee.typeName, x.number);
  };
  const addExtension = (file: DescFile, typeName: string, extendee: string, number: number) => {
    symbols.set(typeName, file);
    extensions.set(`${extendee}#${number}`, file);
    extensionNumbers.set(extendee, [...(extensionNumbers.get(extendee) ?? []), number]);
  };
  const addFile = (file: DescFile) => {
    if (files.has(file.name)) return;
    files.set(file.name, file);
    for (const dep of file.dependencies) addFile(dep);
    for (const message of file.messages) addMessage(file, message);
    for (const e of file.enums) symbols.set(e.typeName, file);
    for (const x of file.extensions) addExtension(file, x.typeName, x.extendee.typeName, x.number);
    for (const service of file.services) {
      symbols.set(service.typeName, file);
      for (const method of service.methods) symbols.set(`${service.typeName}.${method.name}`, file);
    }
  };
  for (const root of roots) addFile(root);
  const bytes = new Map(
    [...files].map(([name, file]) => [`${name}.proto`, toBinary(FileDescriptorProtoSchema, file.proto)]),
  );
  return {
    services,
    files: new Map([...files].map(([name, file]) => [`${name}.proto`, file])),
    symbols,
    extensions,
    extensionNumbers,
    bytes,
  };
}

/** A file and, once per stream, each file it imports (transitively): what grpcurl needs to decode. */
function fileAnswer(catalog: Catalog, file: DescFile, sent: Set<string>) {
  const out: Uint8Array[] = [];
  const visit = (f: DescFile) => {
    const name = `${f.name}.proto`;
    if (sent.has(name)) return;
    sent.add(name);
    out.push(catalog.bytes.get(name)!);
    for (const dep of f.dependencies) visit(dep);
  };
  visit(file);
  // The requested file always comes back, even when this stream already sent it.
  if (out.length === 0) out.push(catalog.bytes.get(`${file.name}.proto`)!);
  return { case: "fileDescriptorResponse" as const, value: { fileDescriptorProto: out } };
}

function notFound(message: string) {
  return { case: "errorResponse" as const, value: { errorCode: Code.NotFound, errorMessage: message } };
}

function answer(catalog: Catalog, req: Request, sent: Set<string>) {
  const request = req.messageRequest;
  switch (request.case) {
    case "fileByFilename": {
      const file = catalog.files.get(request.value);
      return file ? fileAnswer(catalog, file, sent) : notFound(`no file named ${JSON.stringify(request.value)}`);
    }
    case "fileContainingSymbol": {
      const file = catalog.symbols.get(request.value.replace(/^\./, ""));
      return file ? fileAnswer(catalog, file, sent) : notFound(`no symbol named ${JSON.stringify(request.value)}`);
    }
    case "fileContainingExtension": {
      const { containingType, extensionNumber } = request.value;
      const file = catalog.extensions.get(`${containingType}#${extensionNumber}`);
      return file
        ? fileAnswer(catalog, file, sent)
        : notFound(`no extension ${extensionNumber} of ${JSON.stringify(containingType)}`);
    }
    case "allExtensionNumbersOfType": {
      if (!catalog.symbols.has(request.value)) return notFound(`no type named ${JSON.stringify(request.value)}`);
      return {
        case: "allExtensionNumbersResponse" as const,
        value: { baseTypeName: request.value, extensionNumber: catalog.extensionNumbers.get(request.value) ?? [] },
      };
    }
    case "listServices":
      return {
        case: "listServicesResponse" as const,
        value: { service: catalog.services.map((name) => ({ name })) },
      };
    default:
      return {
        case: "errorResponse" as const,
        value: { errorCode: Code.InvalidArgument, errorMessage: "the request names no message_request field" },
      };
  }
}

export interface ReflectionServices {
  readonly v1: ServiceImpl<typeof grpcReflectionV1.ServerReflection>;
  readonly v1alpha: ServiceImpl<typeof grpcReflectionV1alpha.ServerReflection>;
}

/**
 * gRPC server reflection, v1 and the older v1alpha that some clients still
 * ask for, over the given files (and everything they import). `services` is
 * what list_services answers. No maintained reflection package exists for
 * connect-es 2, and the service is this small.
 */
export function createReflectionServices(files: readonly DescFile[], services: readonly string[]): ReflectionServices {
  const catalog = buildCatalog(files, services);
  // Per stream: a client that already received a file is not sent it again (the protocol allows that).
  async function* serve<R extends Request>(requests: AsyncIterable<R>) {
    const sent = new Set<string>();
    for await (const req of requests) {
      yield { validHost: req.host, originalRequest: req, messageResponse: answer(catalog, req, sent) };
    }
  }
  return {
    v1: { serverReflectionInfo: (requests) => serve(requests) },
    v1alpha: { serverReflectionInfo: (requests) => serve(requests) },
  };
}
