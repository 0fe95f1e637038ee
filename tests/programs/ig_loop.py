# A plain infinite loop: never answers, one process, all the CPU it gets.
while True:
    pass
