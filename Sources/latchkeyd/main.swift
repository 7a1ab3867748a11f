print("latchkeyd")
