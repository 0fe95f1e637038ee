/* src/sandbox/warm_bootstrap.py, embedded so that the warm interpreter's
 * bootstrap always matches the binary that speaks its protocol, whatever
 * directory it runs from (src/sandbox/sandbox_warm.c). */
	.section .rodata
	.global sb_warm_bootstrap_start
	.global sb_warm_bootstrap_end
sb_warm_bootstrap_start:
	.incbin "src/sandbox/warm_bootstrap.py"
sb_warm_bootstrap_end:
	.byte 0
	.section .note.GNU-stack,"",@progbits
