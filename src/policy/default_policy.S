/* policies/default.json, embedded so that the binary always has a valid
 * default policy, whatever directory it runs from. */
	.section .rodata
	.global sg_default_policy_start
	.global sg_default_policy_end
sg_default_policy_start:
	.incbin "policies/default.json"
sg_default_policy_end:
	.byte 0
	.section .note.GNU-stack,"",@progbits
