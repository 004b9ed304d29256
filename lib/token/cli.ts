/** Placeholder until the token command lands. */
export function runTokenCommand(_args: string[]): Promise<number> {
  console.error("svcd token: not implemented yet");
  return Promise.resolve(2);
}
