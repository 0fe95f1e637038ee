/* src/interp/interp_bootstrap.py, embedded so that the interpreter forkserver's
 * bootstrap always matches the binary that speaks its protocol, whatever
 * directory it runs from (src/interp/interp.c). */
	.section .rodata
	.global interp_bootstrap_start
	.global interp_bootstrap_end
interp_bootstrap_start:
	.incbin "src/interp/interp_bootstrap.py"
interp_bootstrap_end:
	.byte 0
	.section .note.GNU-stack,"",@progbits
