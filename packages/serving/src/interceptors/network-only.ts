import type { Interceptor } from "@connectrpc/connect";

const networkOnly = Symbol("parley.interceptor.networkOnly");

/**
 * Marks an interceptor whose work only a request that came over the network
 * needs (it deals with decoding the request's bytes): the in-process
 * transport, whose requests are protobuf messages already, leaves it out.
 */
export function networkOnlyInterceptor(interceptor: Interceptor): Interceptor {
  return Object.assign(interceptor, { [networkOnly]: true });
}

/** Whether an interceptor was marked with networkOnlyInterceptor. */
export function isNetworkOnly(interceptor: Interceptor): boolean {
  return (interceptor as { [networkOnly]?: boolean })[networkOnly] === true;
}
