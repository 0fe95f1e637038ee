/* src/session/session_kernel.py, embedded so that the Python kernel a
 * session's steps run always matches the binary that writes it into the
 * scratch (src/session/session_kernel.c). */
	.section .rodata
	.global session_kernel_py_start
	.global session_kernel_py_end
session_kernel_py_start:
	.incbin "src/session/session_kernel.py"
session_kernel_py_end:
	.byte 0
	.section .note.GNU-stack,"",@progbits
