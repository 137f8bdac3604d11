/** What a message may hold; the server's `limits` settings satisfy it. */
export interface MessageLimits {
  readonly maxPartsPerMessage: number;
  readonly maxTextChars: number;
}

/** What the engine reads of the server's settings; the server's config satisfies it. */
export interface EngineConfig {
  readonly card: { readonly inputModes: readonly string[] };
  readonly history: { readonly maxMessages: number; readonly maxChars: number };
  readonly limits: MessageLimits & { readonly agentStepTimeoutMs: number };
}
