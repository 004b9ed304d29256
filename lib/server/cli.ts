/** Placeholder until the daemon lands. */
export function runServeCommand(_args: string[], _opts: { checkOnly: boolean }): Promise<number> {
  console.error("svcd serve: not implemented yet");
  return Promise.resolve(2);
}
