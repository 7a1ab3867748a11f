import LatchkeyAgent

AgentMain.run(arguments: CommandLine.arguments)
