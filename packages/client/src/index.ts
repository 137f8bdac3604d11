// The public API is added by the issue that builds this package.
export {};
